"""Shared by the benchmarks: a database (DATABASE_URL or a fresh embedded PostgreSQL) and
a running `authoric serve` process on it, stopped cleanly afterwards."""

from __future__ import annotations

import contextlib
import os
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

import httpx


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
    import pgserver

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
