"""A real SMTP server for tests (aiosmtpd on a loopback port) that keeps what it receives and
can answer the next N messages with a temporary failure."""

from __future__ import annotations

import email
import email.policy
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

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


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (openssl): a server started with
    SSL_CERT_FILE naming the certificate trusts it, as it would a real CA's."""
    cert, key = folder / "smtp-cert.pem", folder / "smtp-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


class SmtpServer:
    """aiosmtpd on 127.0.0.1:`port`, started and stopped by the test. With `tls` ("starttls":
    STARTTLS required before anything; "implicit": TLS from the first byte) it serves the
    certificate `cert`/`key`; with `login` it takes only that user and password, and only
    over TLS."""

    def __init__(self, port: int | None = None, tls: str | None = None,
                 cert: tuple[Path, Path] | None = None,
                 login: tuple[str, str] | None = None) -> None:
        self.port = port or free_port()
        self.inbox = Inbox()
        self.controller: Controller | None = None
        self.tls, self.cert, self.login = tls, cert, login
        self.logins: list[str] = []  # user names that authenticated

    @property
    def url(self) -> str:
        scheme = "smtps" if self.tls == "implicit" else "smtp"
        user = f"{self.login[0]}:{self.login[1]}@" if self.login else ""
        return f"{scheme}://{user}127.0.0.1:{self.port}"

    def _authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str,
                      auth_data: Any) -> AuthResult:
        ok = (isinstance(auth_data, LoginPassword) and self.login is not None
              and (auth_data.login.decode(), auth_data.password.decode()) == self.login)
        if ok:
            self.logins.append(auth_data.login.decode())
        return AuthResult(success=ok)

    def start(self) -> SmtpServer:
        options: dict[str, Any] = {}
        if self.tls is not None:
            assert self.cert is not None
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*self.cert)
            options = ({"ssl_context": context} if self.tls == "implicit"
                       else {"tls_context": context, "require_starttls": True})
        if self.login is not None:
            # aiosmtpd does not see TLS it did not negotiate itself (implicit TLS) and would
            # then hide AUTH; there every byte is TLS anyway.
            options |= {"authenticator": self._authenticate, "auth_required": True,
                        "auth_require_tls": self.tls != "implicit"}
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port,
                                     **options)
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
