"""A real SMTP server for tests (aiosmtpd on a loopback port) that keeps what it receives and
can answer the next N messages with a temporary failure."""

from __future__ import annotations

import email
import email.policy
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller

from tests.servers import free_port


@dataclass
class Inbox:
    """The messages the server accepted, and how many to refuse with 451 first."""

    messages: list[EmailMessage] = field(default_factory=list)
    refuse_next: int = 0
    refused: int = 0
    unknown: set[str] = field(default_factory=set)  # recipients refused for good (550)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          rcpt_options: list[str]) -> str:
        if address in self.unknown:
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.lock:
            if self.refuse_next > 0:
                self.refuse_next -= 1
                self.refused += 1
                return "451 4.3.0 try again later"
            message = email.message_from_bytes(envelope.content, policy=email.policy.default)
            self.messages.append(message)  # type: ignore[arg-type]
        return "250 OK"

    def to(self, address: str) -> list[EmailMessage]:
        with self.lock:
            return [m for m in self.messages if m["To"] == address]

    def wait_for(self, address: str, count: int = 1, timeout: float = 30) -> list[EmailMessage]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.to(address)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no mail to {address} within {timeout}s: {self.messages}")


class SmtpServer:
    """aiosmtpd on 127.0.0.1:`port`, started and stopped by the test."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.inbox = Inbox()
        self.controller: Controller | None = None

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def start(self) -> SmtpServer:
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)
        self.controller.start()
        return self

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


def body_text(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert part is not None
    return str(part.get_content())  # type: ignore[attr-defined]


def html_text(message: EmailMessage) -> str:
    part = message.get_body(("html",))
    assert part is not None
    return str(part.get_content())  # type: ignore[attr-defined]
