"""Real webhook receivers for tests: an HTTP server on 127.0.0.1, in a thread, that records
every request and answers as the test tells it (fail the next N, redirect, refuse)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A server's environment for delivering webhooks to receivers on 127.0.0.1, retrying after
# 50-200 ms instead of 5 s-1 h.
DELIVERING = {"AUTHORIC_WEBHOOK_ALLOW_PRIVATE": "true", "AUTHORIC_WEBHOOK_DELIVERY": "true",
              "AUTHORIC_WEBHOOK_RETRY_BASE": "0.05", "AUTHORIC_WEBHOOK_RETRY_MAX": "0.2"}


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    path: str

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """One receiver. `answer(received) -> (status, headers)` decides each answer; by default
    200, and `fail_next` answers that many requests with 503 first."""

    requests: list[Received] = field(default_factory=list)
    fail_next: int = 0
    answer: Callable[[Received], tuple[int, dict[str, str]]] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                got = Received({k.lower(): v for k, v in self.headers.items()},
                               self.rfile.read(length), self.path)
                with receiver.lock:
                    receiver.requests.append(got)
                    if receiver.fail_next > 0:
                        receiver.fail_next -= 1
                        status, headers = 503, {}
                    elif receiver.answer is not None:
                        status, headers = receiver.answer(got)
                    else:
                        status, headers = 200, {}
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def received(self) -> list[Received]:
        with self.lock:
            return list(self.requests)

    def first_seen(self) -> list[Received]:
        """Each webhook-id once, in the order first received (a receiver's dedup)."""
        seen: dict[str, Received] = {}
        for got in self.received():
            seen.setdefault(got.id, got)
        return list(seen.values())

    def wait_for(self, check: Callable[[list[Received]], bool], timeout: float = 90.0,
                 what: str = "deliveries") -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.first_seen()
            if check(got):
                return got
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}: {[g.json() for g in self.first_seen()]}")

    def wait_count(self, n: int, timeout: float = 90.0) -> list[Received]:
        return self.wait_for(lambda got: len(got) >= n, timeout, f"{n} deliveries")
