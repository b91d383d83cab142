"""Starting and stopping real `authoric serve` processes for tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ADMIN_TOKEN = "test-admin-token-0123456789"  # 24+ characters: the server refuses shorter


@dataclass
class TestClock:
    """A server's test clock (AUTHORIC_TEST_CLOCK_FILE, authoric/clock.py): how many seconds
    its notion of now runs ahead of the wall clock, for token expiry. A test moves it instead
    of waiting out a token's lifetime, and sets it back to 0 when it is done."""

    __test__ = False  # not a test class, whatever its name
    path: Path

    @classmethod
    def at_zero(cls, directory: Path) -> TestClock:
        clock = cls(directory / "clock-offset")
        clock.set(0)
        return clock

    def set(self, seconds: float) -> None:
        self.path.write_text(str(seconds))

    def env(self) -> dict[str, str]:
        return {"AUTHORIC_TEST_CLOCK_FILE": str(self.path)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServerProcess:
    url: str
    admin_token: str
    process: subprocess.Popen[bytes]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_server(database_url: str, data_dir: Path, port: int | None = None,
                 command: Sequence[str] = (sys.executable, "-m", "authoric.cli"),
                 **extra_env: str) -> ServerProcess:
    port = port or free_port()  # a restart on the same port keeps clients' URLs working
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "AUTHORIC_DATA_DIR": str(data_dir),
        "AUTHORIC_ADMIN_TOKEN": ADMIN_TOKEN,
        "AUTHORIC_TOKEN_RATE_LIMIT": "1000",
        "AUTHORIC_WORKERS": "1",  # one process unless a test asks for more: per-process state
        "AUTHORIC_LOGIN_ACCOUNT_LIMIT": "1000",
        "AUTHORIC_MAIL_RATE_LIMIT": "1000",
        "AUTHORIC_MAIL_ACCOUNT_LIMIT": "1000",
        # Argon2id at its minimum cost: the suite creates and logs in thousands of users, and
        # at the production cost their hashing was about half of a server's CPU in the tests.
        "AUTHORIC_TEST_CHEAP_PASSWORD_HASHING": "1",
        # Every server of a test session shares its database, so a server with other webhook
        # settings would take the leases of another test's webhooks: only servers that a test
        # starts for webhooks deliver them.
        "AUTHORIC_WEBHOOK_DELIVERY": "false",
        **extra_env,
    }
    log_path = data_dir / f"server-{port}.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [*command, "serve", "--port", str(port), "--no-access-log",
         "--log-level", "warning"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180  # only a broken start waits this long; a busy box may take 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log_path.read_text()}")
        try:
            httpx.get(f"{url}/openapi.json", timeout=1)
            return ServerProcess(url, ADMIN_TOKEN, process, log_path, env)
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"server did not start:\n{log_path.read_text()}")
