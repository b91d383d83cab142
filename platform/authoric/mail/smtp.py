"""Delivering one message to the SMTP server named by `AUTHORIC_SMTP_URL`, with aiosmtplib.

`smtp://user:pass@host:587` upgrades with STARTTLS when the server offers it; `smtps://...:465`
speaks TLS from the start. Every step is bounded by the timeout. A failure is `Temporary`
(4xx replies, timeouts, refused or dropped connections: try again later) or `Permanent` (5xx:
the server will not take it).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from urllib.parse import unquote, urlsplit

import aiosmtplib

from authoric.mail.outbox import Mail


class Temporary(Exception):
    """Worth trying again later."""


class Permanent(Exception):
    """The server refused the message for good."""


@dataclass(frozen=True)
class SmtpServer:
    host: str
    port: int
    implicit_tls: bool
    username: str | None
    password: str | None
    timeout: float

    @classmethod
    def from_url(cls, url: str, timeout: float) -> SmtpServer:
        """`smtp://[user:pass@]host[:port]` or `smtps://...`; ValueError for anything else."""
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError("AUTHORIC_SMTP_URL must look like smtp://user:pass@host:587 "
                             "or smtps://user:pass@host:465")
        implicit = parts.scheme == "smtps"
        return cls(parts.hostname, parts.port or (465 if implicit else 587), implicit,
                   unquote(parts.username) if parts.username else None,
                   unquote(parts.password) if parts.password else None, timeout)

    async def deliver(self, mail: Mail) -> None:
        """Send `mail`, or raise Temporary or Permanent."""
        try:
            await aiosmtplib.send(
                message(mail), hostname=self.host, port=self.port, use_tls=self.implicit_tls,
                start_tls=None if not self.implicit_tls else False,  # None: when offered
                username=self.username, password=self.password, timeout=self.timeout,
                tls_context=ssl.create_default_context())
        except aiosmtplib.SMTPRecipientsRefused as exc:
            codes = [error.code for error in exc.recipients]
            raise (Temporary if all(400 <= c < 500 for c in codes) else Permanent)(
                "; ".join(f"{e.code} {e.message}" for e in exc.recipients)) from exc
        except aiosmtplib.SMTPResponseException as exc:
            kind = Temporary if 400 <= exc.code < 500 else Permanent
            raise kind(f"{exc.code} {exc.message}") from exc
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            raise Temporary(f"{type(exc).__name__}: {exc}") from exc


def message(mail: Mail) -> EmailMessage:
    """`mail` as a MIME message: plain text, with the HTML as its alternative."""
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = mail.mail_from, mail.to, mail.subject
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = make_msgid(domain="authoric")
    msg.set_content(mail.text)
    msg.add_alternative(mail.html, subtype="html")
    return msg
