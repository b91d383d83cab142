"""The TypeScript client (`@authoric/client`, clients/typescript) against a real server: its
Vitest suites run in Node against an `authoric serve` process started here, one suite per test.

The server runs with the test clock (`AUTHORIC_TEST_CLOCK_FILE`) so that token expiry is
tested by moving the server's clock, not by waiting. A tiny control endpoint lets a suite kill
the server (SIGKILL) and start it again on the same port while its clients keep running.
Node packages are installed from clients/typescript/package-lock.json (`npm ci`) when missing.
Skipped, loudly, when npm is missing.
"""

from __future__ import annotations

import http.server
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.servers import ServerProcess, start_server

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"

pytestmark = pytest.mark.skipif(shutil.which("npm") is None,
                                reason="the TypeScript client's tests need Node and npm")


def _npm_ci() -> None:
    installed = PACKAGE / "node_modules" / ".package-lock.json"
    lock = PACKAGE / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=PACKAGE,
                       check=True, stdout=subprocess.DEVNULL)


class Restartable:
    """One server process that a suite may kill and start again on the same port."""

    def __init__(self, database_url: str, data_dir: Path, clock_file: Path) -> None:
        self.database_url, self.data_dir, self.clock_file = database_url, data_dir, clock_file
        self.proc = self._start(None)
        self.lock = threading.Lock()

    def _start(self, port: int | None) -> ServerProcess:
        return start_server(self.database_url, self.data_dir, port,
                            AUTHORIC_TEST_CLOCK_FILE=str(self.clock_file))

    @property
    def port(self) -> int:
        return int(self.proc.url.rsplit(":", 1)[1])

    def restart(self) -> None:
        with self.lock:
            self.proc.stop(signal.SIGKILL)
            self.proc = self._start(self.port)

    def stop(self) -> None:
        self.proc.stop()


@pytest.fixture(scope="module")
def node_packages() -> None:
    _npm_ci()


@pytest.fixture(scope="module")
def ts_server(database_url: str, tmp_path_factory: pytest.TempPathFactory,
              node_packages: None) -> Iterator[Restartable]:
    data = tmp_path_factory.mktemp("ts-client")
    clock_file = data / "clock-offset"
    clock_file.write_text("0")
    server = Restartable(database_url, data, clock_file)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def control_url(ts_server: Restartable) -> Iterator[str]:
    """`POST /restart`: kill the server with SIGKILL and start it again on the same port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != "/restart":
                self.send_error(404)
                return
            ts_server.restart()
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True, name="ts control")
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def vitest(suite: str, ts_server: Restartable, control_url: str) -> None:
    """Run one Vitest suite against the server; fail with its output when it fails."""
    ts_server.clock_file.write_text("0")
    env = {**os.environ, "AUTHORIC_URL": ts_server.proc.url,
           "AUTHORIC_ADMIN_TOKEN": ts_server.proc.admin_token,
           "AUTHORIC_CLOCK_FILE": str(ts_server.clock_file), "AUTHORIC_CONTROL_URL": control_url,
           "NO_COLOR": "1"}
    done = subprocess.run([str(PACKAGE / "node_modules" / ".bin" / "vitest"), "run", suite],
                          cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"vitest {suite} failed:\n{done.stdout}\n{done.stderr}"
    assert " passed" in done.stdout and " skipped" not in done.stdout, done.stdout
    print(done.stdout)


def test_a_member_creates_reads_lists_updates_deletes_and_gets_typed_errors(
        ts_server: Restartable, control_url: str) -> None:
    vitest("test/crud.test.ts", ts_server, control_url)


def test_a_member_follows_tables_resumes_from_an_id_and_hears_of_bulk_changes(
        ts_server: Restartable, control_url: str) -> None:
    vitest("test/stream.test.ts", ts_server, control_url)


def test_a_member_keeps_one_session_through_expiry_with_one_refresh_and_streams_through_reauth(
        ts_server: Restartable, control_url: str) -> None:
    vitest("test/session.test.ts", ts_server, control_url)


def test_a_members_streams_get_every_acknowledged_write_once_across_a_server_kill_and_restart(
        ts_server: Restartable, control_url: str) -> None:
    vitest("test/restart.test.ts", ts_server, control_url)


def test_a_members_live_query_converges_to_a_fresh_list_after_a_mix_of_writes(
        ts_server: Restartable, control_url: str) -> None:
    vitest("test/live.test.ts", ts_server, control_url)


def _tsc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PACKAGE / "node_modules" / ".bin" / "tsc"), "--noEmit", *args],
                          cwd=PACKAGE, capture_output=True, text=True, timeout=300)


def test_typed_calls_compile_and_each_named_mistake_fails_tsc(node_packages: None) -> None:
    package = _tsc("-p", "tsconfig.json")  # the library and its tests
    assert package.returncode == 0, package.stdout
    good = _tsc("-p", "test/types/tsconfig.json")  # its @ts-expect-error lines must all fail
    assert good.returncode == 0, good.stdout


def test_a_numeric_column_given_a_number_fails_tsc_on_that_line(node_packages: None) -> None:
    bad = _tsc("-p", "test/types/tsconfig.bad.json")
    lines = (PACKAGE / "test" / "types" / "bad.ts").read_text().splitlines()
    marked = next(i for i, line in enumerate(lines, 1) if "DELIBERATE ERROR" in line)
    errors = re.findall(r"test/types/bad\.ts\((\d+),\d+\): error (TS\d+)", bad.stdout)
    assert bad.returncode != 0
    assert errors == [(str(marked), "TS2322")], bad.stdout


def test_the_packed_tarball_installs_on_its_own_and_talks_to_the_server_from_node(
        ts_server: Restartable, tmp_path: Path) -> None:
    """`npm pack` builds (checking the first-load budget), and the tarball installs into an
    empty project with no other package and works there."""
    packed = subprocess.run(["npm", "pack", "--pack-destination", str(tmp_path), "--loglevel=error"],
                            cwd=PACKAGE, capture_output=True, text=True, timeout=300, check=True)
    assert "KB gzip (budget 15 KB)" in packed.stdout + packed.stderr
    tarball = next(tmp_path.glob("authoric-client-*.tgz"))
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text('{"name": "app", "private": true, "type": "module"}')
    subprocess.run(["npm", "install", str(tarball), "--no-audit", "--no-fund", "--offline",
                    "--loglevel=error"], cwd=app, check=True, capture_output=True, timeout=300)
    installed = app / "node_modules" / "@authoric" / "client"
    assert (installed / "dist" / "index.d.ts").exists() and not (installed / "src").exists()
    assert not (app / "node_modules" / ".bin").exists()  # no dependency came along
    script = """
        import { createClient, AuthoricError } from "@authoric/client";
        import { createAdminClient } from "@authoric/client/admin";
        const [url, token] = process.argv.slice(2);
        const admin = createAdminClient({ url, token });
        const name = "packed" + Date.now();
        await admin.apps.create({ name });
        const app = admin.app(name);
        await app.tables.create({ name: "notes", columns: [{ name: "body", type: "text" }] });
        const org = await app.orgs.create({ name: "O" });
        await app.roles.put("writer", { permissions: ["notes:*"] });
        const user = await app.users.create({ email: "p@example.com", password: "correct horse" });
        await app.members.set(org.uid, user.uid, ["writer"]);
        const db = createClient({ url, app: name });
        await db.auth.signIn({ email: "p@example.com", password: "correct horse" });
        await db.table("notes").create({ body: "from the tarball" });
        const page = await db.table("notes").list();
        let code = null;
        try { await db.table("missing").list(); } catch (e) { code = e instanceof AuthoricError && e.code; }
        console.log(JSON.stringify({ bodies: page.items.map((r) => r.body), code }));
    """
    (app / "check.mjs").write_text(script)
    ran = subprocess.run(["node", "check.mjs", ts_server.proc.url, ts_server.proc.admin_token],
                         cwd=app, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == '{"bodies":["from the tarball"],"code":"NOT_FOUND"}'
