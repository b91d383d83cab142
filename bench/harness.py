"""Shared by the benchmarks: a database (DATABASE_URL or a fresh embedded PostgreSQL), a
running `authoric serve` process on it, stopped cleanly afterwards, and the CPU time those
processes use, read from Linux's /proc."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import platform
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from authoric.db.embedded import pgserver_module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Database:
    url: str
    pid: int | None  # postmaster (embedded only)
    log: Path | None  # the server log (embedded only)
    handle: Any = None


@contextlib.contextmanager
def database(work: Path) -> Iterator[Database]:
    """DATABASE_URL, or a fresh embedded PostgreSQL under `work` (deleted afterwards)."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield Database(url, None, None)
        return
    pgserver = pgserver_module()

    os.chmod(work, 0o755)  # the embedded PostgreSQL may run as another user
    pg_dir = work / "pg"
    pg_dir.mkdir()
    pg = pgserver.get_server(pg_dir, cleanup_mode="delete")
    try:
        yield Database(str(pg.get_uri()), pg.get_pid(), pg_dir / "log", pg)
    finally:
        pg.cleanup()


@dataclass
class Server:
    url: str
    host: str
    port: int
    admin_token: str
    process: subprocess.Popen[bytes]
    log_path: Path
    jwt_secret: str | None = None
    db_url: str = ""
    db_pid: int | None = None  # the embedded postmaster, for CPU accounting

    @property
    def pid(self) -> int:
        return self.process.pid


@contextlib.contextmanager
def running_server(work: Path, db: Database, env: dict[str, str] | None = None,
                   argv: list[str] | None = None, name: str = "server",
                   extra_args: list[str] | None = None) -> Iterator[Server]:
    """`authoric serve --no-access-log --log-level warning` on `db` (or `argv` instead)."""
    port, token, jwt_secret = free_port(), secrets.token_urlsafe(24), secrets.token_urlsafe(32)
    data = work / f"data-{name}"
    data.mkdir(exist_ok=True)
    full_env = {**os.environ, "DATABASE_URL": db.url, "AUTHORIC_DATA_DIR": str(data),
                "AUTHORIC_ADMIN_TOKEN": token, "AUTHORIC_TOKEN_RATE_LIMIT": "1000000",
                "AUTHORIC_LOGIN_ACCOUNT_LIMIT": "1000000",
                # bench users hold many streams each (tokens are shared by subscribers)
                "AUTHORIC_SSE_MAX_STREAMS_PER_USER": "1000000",
                "AUTHORIC_JWT_SECRET": jwt_secret, **(env or {})}
    log_path = work / f"{name}.log"
    cmd = argv or [sys.executable, "-m", "authoric.cli", "serve"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*cmd, "--port", str(port), "--no-access-log", "--log-level", "warning",
             *(extra_args or [])],
            env=full_env, stdout=log, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", "127.0.0.1", port, token, process, log_path,
                    full_env["AUTHORIC_JWT_SECRET"], db.url, db.pid)
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise SystemExit(f"the server exited:\n{log_path.read_text()}")
            try:
                httpx.get(f"{server.url}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start:\n{log_path.read_text()}") from None
                time.sleep(0.1)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


# --- CPU accounting (Linux /proc) ----------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from the `state` field on (the command name may hold spaces)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()


def process_children() -> dict[int, list[int]]:
    """Every live process's children, by parent pid."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))):
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def process_tree(root: int, tree: dict[int, list[int]] | None = None) -> list[int]:
    """`root` and its live descendants."""
    tree = process_children() if tree is None else tree
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(tree.get(pid, []))
    return found


def process_cpu_seconds(pid: int, with_reaped_children: bool = True) -> float:
    """User + system CPU seconds of one process; with its reaped children's (cutime, cstime)
    too, so that a child that exited is still counted through its parent."""
    fields = _stat_fields(pid)
    if not fields:
        return 0.0
    ticks = fields[11:15] if with_reaped_children else fields[11:13]
    return sum(int(x) for x in ticks) / CLK_TCK


def tree_cpu_seconds(root: int, tree: dict[int, list[int]] | None = None) -> float:
    """CPU seconds of `root` and its descendants, live ones by their own time, exited ones
    through their parent's waited-for-children time. Differences between two readings are
    exact as long as no process exits unreaped by a member of the tree."""
    return sum(process_cpu_seconds(pid) for pid in process_tree(root, tree))


def machine_busy_seconds() -> float:
    """CPU seconds all cores have spent not idle (nor waiting on I/O) since boot."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLK_TCK


@dataclass
class PostgresCpu:
    """The CPU time PostgreSQL spends for one Authoric server.

    On the embedded PostgreSQL (a fresh instance per benchmark) that is the postmaster's whole
    tree: backends, WAL writer, checkpointer, autovacuum, all there for this server alone.
    On a shared server (DATABASE_URL) it is the backends connected to the benchmark's
    database, listed from pg_stat_activity at each reading: a backend that exits between two
    readings is missed (the shared postmaster reaps it), so only long-lived pooled
    connections are counted well there."""

    db: Database

    def read(self) -> dict[int, float]:
        """CPU seconds per process, to be compared with a later reading by `used`."""
        if self.db.pid is not None:
            return {self.db.pid: tree_cpu_seconds(self.db.pid)}
        return {pid: process_cpu_seconds(pid, with_reaped_children=False)
                for pid in asyncio.run(database_backend_pids(self.db.url))}

    @staticmethod
    def used(before: dict[int, float], after: dict[int, float]) -> float:
        """CPU seconds used between two readings by the processes alive at the second."""
        return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


async def database_backend_pids(url: str) -> list[int]:
    """The PostgreSQL backends connected to `url`'s database, other than this query's own."""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE datname = "
                                "current_database() AND pid <> pg_backend_pid()")
    finally:
        await conn.close()
    return [int(row["pid"]) for row in rows]


def banner(name: str) -> None:
    print(f"Authoric {name} benchmark, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
          f"{os.cpu_count()} cores (shared by load generator, server and PostgreSQL), "
          f"Python {platform.python_version()}, database: "
          f"{'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'embedded, fresh'}; "
          f"load average before: {os.getloadavg()[0]:.2f}", flush=True)


def install_uvloop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
