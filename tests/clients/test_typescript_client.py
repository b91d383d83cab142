"""The TypeScript client (`@authoric/client`, clients/typescript) against a real server: its
Vitest suites run in Node against an `authoric serve` process started here, one suite per test.

The server runs with the test clock (`AUTHORIC_TEST_CLOCK_FILE`) so that token expiry is
tested by moving the server's clock, not by waiting. A tiny control endpoint lets a suite kill
the server (SIGKILL) and start it again on the same port while its clients keep running.
Node is the console's (tests/node.py: the system's, or console/.node), so it is never missing
where the console builds; packages are installed from clients/typescript/package-lock.json
(`npm ci`) when missing.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests import node
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, free_port, start_server
from tests.tree_lock import tree_lock

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"



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

    def live(self) -> ServerProcess:
        """The running server, once a restart under way has finished: a suite that failed
        while its restart was in flight must not leave the next suite a dead port."""
        with self.lock:
            if self.proc.process.poll() is not None:
                self.proc = self._start(self.port)
            return self.proc

    def stop(self) -> None:
        self.proc.stop()


@pytest.fixture(scope="module")
def node_packages() -> None:
    node.npm_ci(PACKAGE)


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


# A server that lets each user hold one stream, whose lease lapses LEASE_TTL s after its last
# renewal: the 429 for a second stream says (Retry-After) when the first could lapse.
LEASE_TTL = 4


@pytest.fixture(scope="module")
def capped_server(database_url: str, tmp_path_factory: pytest.TempPathFactory,
                  node_packages: None) -> Iterator[ServerProcess]:
    proc = start_server(database_url, tmp_path_factory.mktemp("ts-capped"),
                        AUTHORIC_SSE_MAX_STREAMS_PER_USER="1",
                        AUTHORIC_SSE_LEASE_TTL=str(LEASE_TTL))
    yield proc
    proc.stop()


def vitest(suite: str, ts_server: Restartable, control_url: str) -> None:
    """Run one Vitest suite against the server; fail with its output when it fails."""
    ts_server.clock_file.write_text("0")
    run_vitest(suite, ts_server.live(), AUTHORIC_CLOCK_FILE=str(ts_server.clock_file),
               AUTHORIC_CONTROL_URL=control_url)


def run_vitest(suite: str, server: ServerProcess, **extra: str) -> None:
    env = node.env(AUTHORIC_URL=server.url, AUTHORIC_ADMIN_TOKEN=server.admin_token, NO_COLOR="1",
               **extra)
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


def test_the_platform_admin_manages_apps_tables_indexes_members_roles_and_rows_of_every_org(
        ts_server: Restartable, control_url: str) -> None:
    vitest("test/admin.test.ts", ts_server, control_url)


def test_a_members_stream_over_the_per_user_cap_waits_as_429_retry_after_says_then_connects(
        capped_server: ServerProcess) -> None:
    run_vitest("test/capped.test.ts", capped_server, AUTHORIC_TEST_LEASE_TTL=str(LEASE_TTL))


def _tsc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PACKAGE / "node_modules" / ".bin" / "tsc"), "--noEmit", *args],
                          cwd=PACKAGE, capture_output=True, text=True, timeout=300, env=node.env())


def test_typed_calls_compile_and_each_named_mistake_fails_tsc(node_packages: None) -> None:
    # The library, its tests, and test/types/good.ts, whose @ts-expect-error lines must all fail.
    checked = _tsc("-p", "tsconfig.json")
    assert checked.returncode == 0, checked.stdout


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
    with tree_lock("npm-pack-client"):  # it builds into the package's own dist/
        packed = subprocess.run(node.npm("pack", "--pack-destination", str(tmp_path),
                                         "--loglevel=error"), cwd=PACKAGE, capture_output=True,
                                text=True, timeout=300, check=True, env=node.env())
    assert "KB gzip (budget 15 KB)" in packed.stdout + packed.stderr
    tarball = next(tmp_path.glob("authoric-client-*.tgz"))
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text('{"name": "app", "private": true, "type": "module"}')
    subprocess.run(node.npm("install", str(tarball), "--no-audit", "--no-fund", "--offline",
                        "--loglevel=error"), cwd=app, check=True, capture_output=True, timeout=300,
                   env=node.env())
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
                         cwd=app, capture_output=True, text=True, timeout=120, env=node.env())
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == '{"bodies":["from the tarball"],"code":"NOT_FOUND"}'


# -- in Chromium, on a page of another origin -------------------------------------------------

CHROMIUM = Path(os.environ.get("AUTHORIC_TEST_CHROMIUM", "/usr/bin/chromium"))
WAIT_MS = 60_000


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def page_origin(node_packages: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The library bundled by esbuild into a page, served from its own port (another origin)."""
    out = tmp_path_factory.mktemp("ts-page")
    subprocess.run([str(PACKAGE / "node_modules" / ".bin" / "esbuild"), "test/browser/page.ts",
                    "--bundle", "--format=iife", f"--outfile={out / 'bundle.js'}",
                    "--log-level=warning"], cwd=PACKAGE, check=True, env=node.env())
    (out / "index.html").write_text('<!doctype html><html><head><meta charset="utf-8"></head>'
                                    '<body><script src="/bundle.js"></script></body></html>')
    handler = functools.partial(_QuietHandler, directory=str(out))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True, name="ts page").start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


SIGN_IN = """async ([url, app, email, password]) => {
    window.refreshes = 0;
    const counting = (input, init) => {
        if (input.includes("/auth/refresh")) window.refreshes++;
        return fetch(input, init);
    };
    window.db = authoric.createClient({ url, app, storage: localStorage, fetch: counting });
    if (email) await db.auth.signIn({ email, password });
    return db.auth.session !== null;
}"""


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed")
def test_an_app_on_another_origin_uses_the_client_in_chromium_and_its_two_tabs_share_one_refresh(
        ts_server: Restartable, page_origin: str) -> None:
    from playwright.sync_api import sync_playwright

    with httpx.Client(base_url=ts_server.proc.url, timeout=30) as client:
        world = AppWorld.create(ts_server.proc, client)
        world.table("invoices", [{"name": "number", "type": "text", "required": True},
                                 {"name": "seq", "type": "integer"}])
        org = world.org("Northwind")
        world.role("clerk", ["invoices:*"])
        expect(world.admin.patch(world.base, json={"settings": {
            "allowedOrigins": [page_origin], "accessTokenTtl": 60}}), 200)
        user = world.user()
        world.member(org, user["uid"], ["clerk"])

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context()
        tab = context.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.goto(f"{page_origin}/index.html")
        tab.wait_for_function("window.authoric !== undefined", timeout=WAIT_MS)
        assert tab.evaluate(SIGN_IN, [ts_server.proc.url, world.name, user["email"],
                                      user["password"]])
        # A stream and a live query, then writes: CORS carries the bearer and Last-Event-ID.
        tab.evaluate("""() => {
            window.events = []; window.rows = null; window.statuses = [];
            window.sub = db.table("invoices").subscribe({ onEvent: (e) => events.push(e),
                                                          onStatus: (s) => statuses.push(s) });
            window.live = db.table("invoices").liveQuery({ order: "-seq", limit: 3 },
                                                         (r) => { rows = r; });
        }""")
        tab.wait_for_function("window.rows !== null && sub.status === 'live'", timeout=WAIT_MS)
        tab.evaluate("""async () => {
            const t = db.table("invoices");
            for (let i = 0; i < 5; i++) await t.create({ number: `B-${i}`, seq: i });
            const first = (await t.list({ order: "seq", limit: 1 })).items[0];
            await t.update(first.uid, { seq: 10 });
            const gone = (await t.list({ filter: { seq: 4 } })).items[0];
            await t.delete(gone.uid);
        }""")
        tab.wait_for_function("events.length === 7", timeout=WAIT_MS)
        assert tab.evaluate("events.map((e) => e.op)") == ["insert"] * 5 + ["update", "delete"]
        tab.wait_for_function("rows.map((r) => r.number).join() === 'B-0,B-3,B-2'",
                              timeout=WAIT_MS)

        # A second tab of the same app takes the stored session. The server's clock moves past
        # the token's life; both tabs call at once: one refresh between them, under a Web Lock.
        other = context.new_page()
        other.on("pageerror", lambda e: errors.append(str(e)))
        other.goto(f"{page_origin}/index.html")
        other.wait_for_function("window.authoric !== undefined", timeout=WAIT_MS)
        assert other.evaluate(SIGN_IN, [ts_server.proc.url, world.name, None, None])
        ts_server.clock_file.write_text("61")
        try:
            calls = "() => Promise.all([1, 2, 3, 4, 5].map(() => db.table('invoices').list()))" \
                    ".then((pages) => pages.map((p) => p.items.length))"
            tab.evaluate("window.tabCalls = (" + calls + ")()")
            other.evaluate("window.tabCalls = (" + calls + ")()")
            assert tab.evaluate("tabCalls") == [4] * 5
            assert other.evaluate("tabCalls") == [4] * 5
            assert tab.evaluate("refreshes") + other.evaluate("refreshes") == 1
            # The family survives: either tab refreshes again, and both go on working.
            other.evaluate("db.auth.refresh()")
            assert tab.evaluate("db.table('invoices').list().then((p) => p.items.length)") == 4
        finally:
            ts_server.clock_file.write_text("0")
        assert errors == []
        context.close()
        browser.close()


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed")
def test_the_invoice_board_example_runs_with_one_command_and_two_windows_follow_each_other(
        ts_server: Restartable, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    port = free_port()
    env = node.env(AUTHORIC_URL=ts_server.proc.url, BOARD_PORT=str(port),
               AUTHORIC_ADMIN_TOKEN=ts_server.proc.admin_token, BOARD_APP=f"board{port}")
    log = (tmp_path / "board.log").open("w")
    board = subprocess.Popen(["node", str(ROOT / "examples" / "invoice-board" / "run.mjs")],
                             env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        origin = f"http://127.0.0.1:{port}"
        for _ in range(600):  # up to 60 s for setup and bundling
            try:
                if httpx.get(origin, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert board.poll() is None, (tmp_path / "board.log").read_text()
            time.sleep(0.1)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                        args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context()
            first = context.new_page()
            first.goto(origin)
            first.click("#signin button")
            first.wait_for_selector("#status.live", timeout=WAIT_MS)
            second = context.new_page()  # the same browser: it takes the stored session
            second.goto(origin)
            second.wait_for_selector("#status.live", timeout=WAIT_MS)
            first.fill("#new-vendor [name=name]", "Acme Paper")
            first.click("#new-vendor button")
            first.wait_for_selector("#vendor option:has-text('Acme Paper')", state="attached",
                                    timeout=WAIT_MS)
            first.fill("#new [name=number]", "INV-1")
            first.fill("#new [name=amount]", "120.00")
            first.select_option("#vendor", label="Acme Paper")
            first.click("#new button")
            second.wait_for_selector("#col-received li:has-text('INV-1'):has-text('Acme Paper')",
                                     timeout=WAIT_MS)
            second.click("#col-received li:has-text('INV-1') button[data-move]")
            first.wait_for_selector("#col-approved li:has-text('INV-1')", timeout=WAIT_MS)
            first.click("#pay-all")  # a bulk update: a resync, and both boards refetch
            second.wait_for_selector("#col-paid li:has-text('INV-1')", timeout=WAIT_MS)
            assert first.inner_text("#error") == "" and second.inner_text("#error") == ""
            browser.close()
    finally:
        board.terminate()
        board.wait(10)
        log.close()


def test_types_written_by_authoric_typegen_type_the_client_and_catch_a_wrong_column(
        ts_server: Restartable, tmp_path: Path) -> None:
    from authoric.typegen import pascal

    with httpx.Client(base_url=ts_server.proc.url, timeout=30) as client:
        world = AppWorld.create(ts_server.proc, client)
        world.table("vendors", [{"name": "name", "type": "text", "required": True}])
        world.table("invoices", [{"name": "number", "type": "text", "required": True},
                                 {"name": "amount", "type": "numeric"},
                                 {"name": "vendor", "type": "reference", "references": "vendors"}])
    types, usage = tmp_path / "app_types.ts", tmp_path / "use.ts"
    subprocess.run([sys.executable, "-m", "authoric.cli", "typegen", "--app", world.name,
                    "--lang", "ts", "--url", ts_server.proc.url, "--token",
                    ts_server.proc.admin_token, "--out", str(types)], check=True,
                   capture_output=True, timeout=120)
    usage.write_text(f"""
import {{ createClient }} from "{PACKAGE / 'src' / 'index.ts'}";
import type {{ {pascal(world.name)}Tables }} from "./{types.stem}.ts";
const db = createClient<{pascal(world.name)}Tables>({{ url: "http://127.0.0.1", app: "x" }});
export async function use(): Promise<string | null> {{
  const row = await db.table("invoices").create({{ number: "1", amount: "2.50", vendor_uid: null }});
  await db.table("vendors").list({{ filter: {{ name: {{ like: "A%" }} }}, order: "-name" }});
  // @ts-expect-error: no such column
  await db.table("invoices").update(row.uid, {{ amont: "3" }});
  // @ts-expect-error: numeric columns are strings
  await db.table("invoices").update(row.uid, {{ amount: 3 }});
  return row.amount;
}}
""")
    checked = subprocess.run([str(PACKAGE / "node_modules" / ".bin" / "tsc"), "--noEmit",
                              "--strict", "--target", "ES2022", "--module", "NodeNext",
                              "--moduleResolution", "NodeNext", "--skipLibCheck",
                              "--allowImportingTsExtensions", "--lib", "ES2022,DOM",
                              str(usage)], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300, env=node.env())
    assert checked.returncode == 0, checked.stdout + types.read_text()


def test_a_person_signs_up_verifies_resets_changes_switches_and_creates_an_org(
        ts_server: Restartable, control_url: str) -> None:
    vitest("test/accounts.test.ts", ts_server, control_url)


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed")
def test_the_accounts_example_signs_up_verifies_from_the_mailbox_and_resets_a_password(
        ts_server: Restartable, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright
    from tests.accounts import mails_to, new_email

    port = free_port()
    app = f"accounts{port}"
    env = node.env(AUTHORIC_URL=ts_server.proc.url, ACCOUNTS_PORT=str(port),
               AUTHORIC_ADMIN_TOKEN=ts_server.proc.admin_token, ACCOUNTS_APP=app)
    log = (tmp_path / "accounts.log").open("w")
    pages = subprocess.Popen(["node", str(ROOT / "examples" / "accounts" / "run.mjs")],
                             env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        origin = f"http://127.0.0.1:{port}"
        for _ in range(600):  # up to 60 s for setup and bundling
            try:
                if httpx.get(origin, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert pages.poll() is None, (tmp_path / "accounts.log").read_text()
            time.sleep(0.1)
        email = new_email()
        with httpx.Client(base_url=ts_server.proc.url, timeout=30) as client, \
                sync_playwright() as p:
            world = AppWorld(ts_server.proc, app, Caller(client, ts_server.proc.admin_token))
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                        args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            page.goto(origin)
            page.fill("#signup [name=email]", email)
            page.fill("#signup [name=password]", "a long password")
            page.click("#signup button")
            page.wait_for_selector("#message:has-text('Check your mail')", timeout=WAIT_MS)
            [mail] = mails_to(world, email)
            verify_link = next(w for w in mail["text"].split() if w.startswith(origin))
            page.goto(verify_link)
            page.wait_for_selector("#message:has-text('Your email is confirmed')", timeout=WAIT_MS)
            page.goto(f"{origin}/forgot")
            page.fill("#forgot [name=email]", email)
            page.click("#forgot button")
            page.wait_for_selector("#message:has-text('reset link is on its way')",
                                   timeout=WAIT_MS)
            reset = next(m for m in mails_to(world, email) if "Reset" in m["subject"])
            page.goto(next(w for w in reset["text"].split() if w.startswith(origin)))
            page.fill("#reset [name=password]", "a brand new password")
            page.click("#reset button")
            page.wait_for_selector("#message:has-text('Your password is changed')",
                                   timeout=WAIT_MS)
            page.goto(f"{origin}/signin")
            page.fill("#signin [name=email]", email)
            page.fill("#signin [name=password]", "a brand new password")
            page.click("#signin button")
            page.wait_for_selector(f"#message:has-text('Signed in as {email} (no org yet)')",
                                   timeout=WAIT_MS)
            browser.close()
    finally:
        pages.terminate()
        pages.wait(10)
        log.close()


def test_a_member_invites_changes_removes_members_and_a_backend_job_uses_an_api_key(
        ts_server: Restartable, control_url: str) -> None:
    vitest("test/tenancy.test.ts", ts_server, control_url)
