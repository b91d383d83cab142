"""The `authoric` command as an operator runs it: `import`, `export` and `seed --demo` as
subprocesses on the test database (DATABASE_URL), next to a running server.

Exit codes: 0 done; 1 the file was refused (nothing written); 2 a wrong name (app, table,
org, file) or a bad option.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect, unique
from tests.servers import ServerProcess, free_port
from tests.sse import SSEClient

AUTHORIC = str(Path(sys.executable).with_name("authoric"))


@dataclass
class Run:
    code: int
    out: str
    err: str


Cli = Callable[..., Run]


@pytest.fixture
def cli(database_url: str, tmp_path: Path) -> Cli:
    env = {**os.environ, "DATABASE_URL": database_url, "AUTHORIC_DATA_DIR": str(tmp_path / "data"),
           "COLUMNS": "200", "NO_COLOR": "1"}

    def run(*args: str, url: str | None = None) -> Run:
        proc = subprocess.run([AUTHORIC, *args], env={**env, **({"DATABASE_URL": url} if url else {})},
                              capture_output=True, timeout=120, cwd=tmp_path)
        # Decoded as is: CSV on stdout keeps its CRLF line ends.
        return Run(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    return run


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
def books(world: AppWorld) -> AppWorld:
    world.table("invoices", [
        {"name": "number", "type": "text", "required": True, "unique": True},
        {"name": "amount", "type": "numeric"},
        {"name": "paid", "type": "boolean"},
        {"name": "note", "type": "text"},
    ])
    world.role("clerk", ["invoices:*"])
    world.org("A")
    world.org("B")
    return world


def _write(tmp_path: Path, text: str | bytes, name: str = "in.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def _error_rows(err: str) -> list[list[str]]:
    """The body rows of the error table printed on stderr: [line, column, message]."""
    table = err[err.index("Rows refused"):]
    return [[cell.strip() for cell in row.strip().strip("│").split("│")]
            for row in table.splitlines() if row.strip().startswith("│")]


def _numbers(world: AppWorld, caller: Caller) -> list[str]:
    items = expect(caller.get(world.rows("invoices"), params={"limit": 1000, "order": "number"}),
                   200)["items"]
    return [r["number"] for r in items]


# import -----------------------------------------------------------------------------------

def test_operator_imports_a_file_shows_progress_and_exits_0(
        books: AppWorld, cli: Cli, tmp_path: Path) -> None:
    clerk_a = books.caller(books.orgs["A"], ["clerk"])
    clerk_b = books.caller(books.orgs["B"], ["clerk"])
    path = _write(tmp_path, "number,amount,paid\n" + "".join(
        f"N-{i:04d},{i}.50,{'yes' if i % 2 else 'no'}\n" for i in range(1500)))
    with SSEClient(books.server.url, f"{books.rows('invoices')}/subscribe", clerk_a.token) as feed:
        feed.wait_connected()
        run = cli("import", str(path), "--app", books.name, "--table", "invoices",
                  "--org", books.orgs["A"])
        assert run.code == 0, run.err
        assert "imported 1500 rows into invoices" in run.err
        assert f"importing {path.name}" in run.err  # the progress line
        # More than 1,000 rows: subscribers of the org get one resync.
        frame = feed.wait_for(lambda f: f.event == "resync")
        assert frame.data == {"reason": "bulk_change", "table": "invoices"}
    assert len(_numbers(books, clerk_a)) == 1000  # a page; the rest follows
    assert expect(clerk_a.get(books.rows("invoices"), params={"number": "N-1499"}), 200)["items"][0][
        "amount"] == "1499.50"
    assert _numbers(books, clerk_b) == []


def test_operator_import_of_a_small_file_sends_one_insert_per_row(
        books: AppWorld, cli: Cli, tmp_path: Path) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    path = _write(tmp_path, "number,note\nS-1,first\nS-2,\"second, with comma\"\n")
    with SSEClient(books.server.url, f"{books.rows('invoices')}/subscribe", clerk.token) as feed:
        feed.wait_connected()
        run = cli("import", str(path), "--app", books.name, "--table", "invoices",
                  "--org", books.orgs["A"])
        assert run.code == 0, run.err
        feed.wait_until(lambda frames: sum(1 for f in frames if f.is_change) == 2)
        assert sorted(f.data["row"]["number"] for f in feed.changes()) == ["S-1", "S-2"]
        assert all(f.op == "insert" for f in feed.changes())


def test_operator_importing_a_bad_file_gets_an_error_table_exit_1_and_nothing_written(
        books: AppWorld, cli: Cli, tmp_path: Path) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    expect(clerk.post(books.rows("invoices"), json={"number": "DUP"}), 201)
    path = _write(tmp_path, "number,amount,paid\nOK-1,1,true\nOK-2,lots,true\nOK-3,1,maybe\n"
                            "DUP,1,true\nOK-5,1\n")
    run = cli("import", str(path), "--app", books.name, "--table", "invoices",
              "--org", books.orgs["A"])
    assert run.code == 1, run.err
    assert "nothing was imported" in run.err
    assert "importing in.csv" in run.err  # the progress line
    assert _error_rows(run.err) == [["3", "amount", "expected a decimal number"],
                                    ["4", "paid", "expected a boolean (true/false/1/0/yes/no)"],
                                    ["6", "", "expected 3 fields, found 2"]]
    assert _numbers(books, clerk) == ["DUP"]
    # Only the per-row checks ran; with those fixed, the database checks speak.
    fixed = _write(tmp_path, "number,amount,paid\nOK-1,1,true\nDUP,1,true\n", "fixed.csv")
    run = cli("import", str(fixed), "--app", books.name, "--table", "invoices",
              "--org", books.orgs["A"])
    assert run.code == 1 and "duplicate value" in run.err, run.err
    assert _numbers(books, clerk) == ["DUP"]


def test_operator_importing_a_file_with_an_unknown_column_or_bad_encoding_gets_exit_1(
        books: AppWorld, cli: Cli, tmp_path: Path) -> None:
    args = ["--app", books.name, "--table", "invoices", "--org", books.orgs["A"]]
    run = cli("import", str(_write(tmp_path, "number,colour\nX,red\n")), *args)
    assert run.code == 1 and "colour" in run.err and "unknown column" in run.err, run.err
    run = cli("import", str(_write(tmp_path, "number\ncaf\xe9\n".encode("latin-1"))), *args)
    assert run.code == 1 and "UTF-8" in run.err, run.err
    run = cli("import", str(_write(tmp_path, b"")), *args)
    assert run.code == 1, run.err


def test_operator_names_the_org_by_its_name_for_import_and_export(
        books: AppWorld, cli: Cli, tmp_path: Path) -> None:
    path = _write(tmp_path, "number,amount\nNAMED-1,5\n")
    run = cli("import", str(path), "--app", books.name, "--table", "invoices", "--org", "B")
    assert run.code == 0, run.err
    assert _numbers(books, books.caller(books.orgs["B"], ["clerk"])) == ["NAMED-1"]
    assert _numbers(books, books.caller(books.orgs["A"], ["clerk"])) == []
    run = cli("export", "--app", books.name, "--table", "invoices", "--org", "B")
    assert run.code == 0, run.err
    assert "NAMED-1" in run.out
    run = cli("export", "--app", books.name, "--table", "invoices", "--org", "no-such-org")
    assert run.code == 2 and "no such org" in run.err


def test_operator_naming_a_wrong_app_table_org_or_file_gets_exit_2(
        books: AppWorld, cli: Cli, tmp_path: Path) -> None:
    path = _write(tmp_path, "number\nX-1\n")
    org = books.orgs["A"]
    for args in (["--app", "no_such_app", "--table", "invoices", "--org", org],
                 ["--app", books.name, "--table", "nope", "--org", org],
                 ["--app", books.name, "--table", "invoices", "--org", str(uuid.uuid4())],
                 ["--app", books.name, "--table", "invoices", "--org", "not-a-uuid"]):
        run = cli("import", str(path), *args)
        assert run.code == 2, (args, run.err)
        assert "Traceback" not in run.err
    run = cli("import", str(tmp_path / "missing.csv"), "--app", books.name, "--table", "invoices",
              "--org", org)
    assert run.code == 2 and "no such file" in run.err
    run = cli("import", str(path), "--app", books.name, "--table", "invoices")  # no --org
    assert run.code == 2 and "--org" in run.err
    clerk = books.caller(org, ["clerk"])
    assert _numbers(books, clerk) == []


def test_operator_import_with_an_unreachable_database_is_neither_ok_nor_refused(
        books: AppWorld, cli: Cli, tmp_path: Path, database_url: str) -> None:
    from sqlalchemy.engine import make_url

    gone = make_url(database_url).set(database=f"missing_{uuid.uuid4().hex[:8]}")
    run = cli("import", str(_write(tmp_path, "number\nX\n")), "--app", books.name, "--table",
              "invoices", "--org", books.orgs["A"], url=gone.render_as_string(hide_password=False))
    assert run.code == 3, (run.code, run.err[-2000:])
    assert "Traceback" not in run.err and "does not exist" in run.err


# export -----------------------------------------------------------------------------------

def test_operator_exports_an_orgs_rows_to_stdout_or_a_file_with_a_filter(
        books: AppWorld, cli: Cli, tmp_path: Path) -> None:
    clerk_a = books.caller(books.orgs["A"], ["clerk"])
    clerk_b = books.caller(books.orgs["B"], ["clerk"])
    for number, paid, note in [("A-1", True, "=cmd"), ("A-2", False, "plain"), ("A-3", True, None)]:
        expect(clerk_a.post(books.rows("invoices"), json={"number": number, "paid": paid,
                                                          "note": note}), 201)
    expect(clerk_b.post(books.rows("invoices"), json={"number": "B-1"}), 201)
    args = ["--app", books.name, "--table", "invoices", "--org", books.orgs["A"]]
    run = cli("export", *args)
    assert run.code == 0, run.err
    rows = list(csv.DictReader(io.StringIO(run.out, newline="")))
    assert [r["number"] for r in rows] == ["A-1", "A-2", "A-3"]
    assert rows[0]["note"] == "'=cmd" and rows[2]["note"] == ""
    over_http = clerk_a.get(books.rows("invoices"), headers={"Accept": "text/csv"}).text
    assert run.out == over_http
    out = tmp_path / "out.csv"
    run = cli("export", *args, "--out", str(out), "--filter", json.dumps({"paid": {"eq": True}}))
    assert run.code == 0, run.err
    rows = list(csv.DictReader(io.StringIO(out.read_text(), newline="")))
    assert [r["number"] for r in rows] == ["A-1", "A-3"]


def test_operator_export_with_wrong_names_or_a_bad_filter_gets_exit_2(
        books: AppWorld, cli: Cli) -> None:
    org = books.orgs["A"]
    for args in (["--app", "no_such_app", "--table", "invoices", "--org", org],
                 ["--app", books.name, "--table", "nope", "--org", org],
                 ["--app", books.name, "--table", "invoices", "--org", str(uuid.uuid4())],
                 ["--app", books.name, "--table", "invoices", "--org", org, "--filter", "{nope"],
                 ["--app", books.name, "--table", "invoices", "--org", org, "--filter",
                  json.dumps({"nope": 1})]):
        run = cli("export", *args)
        assert run.code == 2, (args, run.err)
        assert "Traceback" not in run.err and run.out == ""


# seed -------------------------------------------------------------------------------------

def test_operator_seeds_the_demo_then_a_seeded_user_logs_in_over_http_and_lists(
        cli: Cli, server: ServerProcess, http: httpx.Client) -> None:
    app = unique("demo")
    run = cli("seed", "--demo", "--app", app, "--url", server.url)
    assert run.code == 0, run.err
    assert "auditor@northwind.test" in run.out and server.url in run.out

    def login(email: str) -> Caller:
        pair = expect(http.post(f"/{app}/auth/token",
                                json={"email": email, "password": "demo-password"}), 200)
        return Caller(http, pair["access_token"])

    auditor = login("auditor@northwind.test")
    invoices = expect(auditor.get(f"/{app}/autocrud/invoices"), 200)["items"]
    assert sorted(i["invoice_number"] for i in invoices) == ["NW-0002", "NW-0003"]
    vendors = expect(auditor.get(f"/{app}/autocrud/vendors"), 200)["items"]
    assert [(v["name"], v["tax_id"]) for v in vendors] == [("NW Paper Co", "[redacted]")]
    payments = expect(auditor.get(f"/{app}/autocrud/payments"), 200)["items"]
    assert [p["bank_account"] for p in payments] == ["[redacted]"]
    clerk = login("clerk@contoso.test")
    numbers = sorted(i["invoice_number"] for i in
                     expect(clerk.get(f"/{app}/autocrud/invoices"), 200)["items"])
    assert numbers == ["CT-0001", "CT-0002", "CT-0003"]
    expect(clerk.post(f"/{app}/autocrud/invoices", json={"invoice_number": "CT-0004"}), 201)
    expect(clerk.post(f"/{app}/autocrud/payments", json={"invoice_uid": invoices[0]["uid"],
                                                         "amount": "1"}), 403, "FORBIDDEN")
    # Seeding the same app again is refused without a traceback.
    again = cli("seed", "--demo", "--app", app)
    assert again.code == 1 and "Traceback" not in again.err + again.out, again.err


def test_seed_without_demo_exits_2(cli: Cli) -> None:
    run = cli("seed")
    assert run.code == 2


# --- `authoric serve` as an operator starts and stops it --------------------------------------

SERVE_TIMEOUT = 120.0  # seconds: workers (or an embedded PostgreSQL) start slowly on a busy box


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    url: str
    output: Path

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(SERVE_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"serve did not exit after SIGTERM:\n{self.text()}") from None


def serve(env: dict[str, str], output: Path, *args: str) -> Served:
    """`authoric serve` with exactly `env` (no test defaults), ready once /healthz answers."""
    port = free_port()
    with output.open("wb") as out:
        process = subprocess.Popen([AUTHORIC, "serve", "--port", str(port), *args], env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
    served = Served(process, f"http://127.0.0.1:{port}", output)
    deadline = time.monotonic() + SERVE_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve exited early:\n{served.text()}")
        try:
            if httpx.get(f"{served.url}/healthz", timeout=2).status_code == 200:
                return served
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    served.stop()
    raise AssertionError(f"serve did not start:\n{served.text()}")


def bare_env(**extra: str) -> dict[str, str]:
    """The environment without any Authoric setting, plus `extra`."""
    return {**{k: v for k, v in os.environ.items()
               if not k.startswith("AUTHORIC_") and k != "DATABASE_URL"}, **extra}


def fresh(url: str, token: str) -> httpx.Response:
    """A GET on a new connection each time, so either worker may take it."""
    return httpx.get(url, headers={"Authorization": f"Bearer {token}", "Connection": "close"},
                     timeout=30)


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process `pid` holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def tcp_sockets(port: int, state: str) -> set[str]:
    """Inodes of the TCP sockets (IPv4) whose local port is `port`, in `state` (hex, as
    /proc/net/tcp writes it: 0A listening, 01 established)."""
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    fields = [line.split() for line in lines]
    return {f[9] for f in fields if int(f[1].split(":")[1], 16) == port and f[3] == state}


def child_pids(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def listening_workers(served: Served) -> tuple[int, list[int]]:
    """The server's port and its workers' pids, once both workers listen (or the wait ran
    out: /healthz answered, so one worker is up)."""
    port = int(served.url.rsplit(":", 1)[1])
    deadline = time.monotonic() + SERVE_TIMEOUT
    while len(tcp_sockets(port, "0A")) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    return port, [pid for pid in child_pids(served.process.pid)
                  if socket_inodes(pid) & tcp_sockets(port, "0A")]


def test_clients_of_an_operator_serving_two_workers_are_spread_over_both(
        database_url: str, tmp_path: Path) -> None:
    """Each worker listens on a socket of its own (SO_REUSEPORT), so a burst of connections
    is shared by the kernel instead of going to whichever worker woke first."""
    served = serve(bare_env(DATABASE_URL=database_url, AUTHORIC_DATA_DIR=str(tmp_path / "data")),
                   tmp_path / "serve.out", "--workers", "2")
    try:
        port, workers = listening_workers(served)
        assert len(workers) == 2 and len(tcp_sockets(port, "0A")) == 2
        clients = [httpx.Client(base_url=served.url, timeout=30) for _ in range(32)]
        try:
            assert all(c.get("/healthz").status_code == 200 for c in clients)
            open_ = tcp_sockets(port, "01")
            held = [len(socket_inodes(pid) & open_) for pid in workers]
            # 32 connections hashed over two sockets: all on one would happen once in 2**31.
            assert sum(held) == 32 and min(held) > 0
        finally:
            for client in clients:
                client.close()
    finally:
        served.stop()


def test_operator_serving_two_workers_on_an_empty_data_dir_gets_one_admin_token_printed_once(
        database_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"  # does not exist yet
    env = bare_env(DATABASE_URL=database_url, AUTHORIC_DATA_DIR=str(data))
    first = serve(env, tmp_path / "first.out", "--workers", "2")
    try:
        token = (data / "admin_token").read_text().strip()
        assert sorted(p.name for p in data.iterdir()) == ["admin_token", "jwt_secret"]
        assert all((data / n).stat().st_mode & 0o777 == 0o600 for n in ("admin_token", "jwt_secret"))
        # Every worker accepts the admin token and every token any worker signs.
        assert all(fresh(f"{first.url}/admin/apps", token).status_code == 200 for _ in range(20))
        with httpx.Client(base_url=first.url, timeout=30) as client:
            world = AppWorld.create(ServerProcess(first.url, token, first.process, first.output),
                                    client)
            world.table("notes", [{"name": "body", "type": "text"}])
            world.role("reader", ["notes:read_list"])
            member = world.caller(world.org("A"), ["reader"])
        assert member.token is not None
        codes = [fresh(f"{first.url}{world.rows('notes')}", member.token).status_code
                 for _ in range(20)]
        assert codes == [200] * 20
        assert first.stop() == 0
        assert first.text().count(token) == 2  # the announcement and the curl hint, once
    finally:
        first.stop()
    again = serve(env, tmp_path / "again.out", "--workers", "1")
    try:
        assert (data / "admin_token").read_text().strip() == token  # kept, not regenerated
        assert fresh(f"{again.url}/admin/apps", token).status_code == 200
    finally:
        assert again.stop() == 0
    assert token not in again.text()
    assert f"admin token: in {data / 'admin_token'}" in again.text()


def test_operator_giving_the_admin_token_in_the_environment_never_sees_it_printed(
        database_url: str, tmp_path: Path) -> None:
    token = "an-admin-token-from-the-environment-0123"
    served = serve(bare_env(DATABASE_URL=database_url, AUTHORIC_DATA_DIR=str(tmp_path / "data"),
                            AUTHORIC_ADMIN_TOKEN=token), tmp_path / "serve.out", "--workers", "1")
    try:
        assert fresh(f"{served.url}/admin/apps", token).status_code == 200
    finally:
        assert served.stop() == 0
    assert token not in served.text()
    assert "admin token: from AUTHORIC_ADMIN_TOKEN" in served.text()
    assert not (tmp_path / "data" / "admin_token").exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_operator_stopping_serve_with_sigterm_also_stops_the_embedded_postgresql_it_started(
        tmp_path: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="authoric-embedded-"))
    os.chmod(work, 0o755)  # the embedded PostgreSQL may run as another user (as root: pgserver)
    # As in a container or CI: no login session, so no XDG_RUNTIME_DIR.
    env = {k: v for k, v in bare_env(AUTHORIC_DATA_DIR=str(work / "data")).items()
           if k != "XDG_RUNTIME_DIR"}
    try:
        served = serve(env, tmp_path / "serve.out", "--workers", "1")
        try:
            postmaster = int((work / "data" / "pg" / "postmaster.pid").read_text().split()[0])
            assert _alive(postmaster)
        finally:
            code = served.stop()
        assert code == 0, served.text()
        deadline = time.monotonic() + SERVE_TIMEOUT
        while _alive(postmaster) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(postmaster), "the embedded PostgreSQL kept running after serve exited"
        assert "Warning" not in served.text()  # platformdirs' RuntimeDirWarning among others
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_operator_with_json_logs_finds_a_clients_request_id_on_that_requests_log_line(
        database_url: str, tmp_path: Path) -> None:
    served = serve(bare_env(DATABASE_URL=database_url, AUTHORIC_DATA_DIR=str(tmp_path / "data"),
                            AUTHORIC_LOG_FORMAT="json"), tmp_path / "serve.out", "--workers", "1")
    try:
        answer = httpx.get(f"{served.url}/admin/apps/some-app", timeout=30,
                           headers={"X-Request-ID": "support-ticket-4711"})
        assert answer.json()["error"]["details"]["requestId"] == "support-ticket-4711"
    finally:
        assert served.stop() == 0
    # The start-up announcement (URL, console, admin token) is plain text for a person; every
    # line after it is one JSON object.
    text = served.text()
    logged = text[text.index("\n{"):]
    lines = [json.loads(line) for line in logged.splitlines() if line.strip()]
    assert lines, served.text()
    mine = [line for line in lines if line.get("requestId") == "support-ticket-4711"]
    assert [(m["route"], m["status"]) for m in mine] == [("/admin/apps/{app}", 401)]
    assert "some-app" not in mine[0]["route"]


# serve on a taken port ------------------------------------------------------------------------

def test_operator_starting_serve_on_a_taken_port_is_told_so_first_and_offered_another(
        cli: Cli) -> None:
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        run = cli("serve", "--host", "127.0.0.1", "--port", str(port))
    assert run.code == 3, run
    assert "starting at" not in run.out + run.err
    assert f"cannot listen on 127.0.0.1:{port}" in run.err
    assert f"--port {port + 1}" in run.err
    assert "Traceback" not in run.err
