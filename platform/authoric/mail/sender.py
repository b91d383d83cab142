"""The mail sender: one task per process that delivers the outbox's pending mail after commit.

Each mail is claimed with `SELECT ... FOR UPDATE SKIP LOCKED` and kept locked while it is
sent, in one transaction: however many processes and replicas run a sender, one of them sends
a given mail, and a process killed mid-send leaves the row pending (its lock dies with its
connection) for the next sender. What the SMTP server accepted is marked `sent` and its body
cleared; a temporary failure (4xx, timeout, connection refused) is tried again after a
backoff that doubles each time (`AUTHORIC_MAIL_RETRY_BASE`), until
`AUTHORIC_MAIL_MAX_ATTEMPTS`; a permanent one (5xx) is marked `failed` with the server's
answer. A failed mail's body is cleared too: it is never sent again, and its links hold live
tokens. Delivery is at least once: a process killed after the server accepted a mail and
before its commit sends it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric.db import tables as t
from authoric.mail.outbox import FAILED, PENDING, SENT, Mail
from authoric.mail.smtp import Permanent, SmtpServer, Temporary
from authoric.settings import Settings

log = logging.getLogger("authoric.mail")
MAX_BACKOFF = 3600.0
MAX_ERROR_CHARS = 1000
# A mail done with, sent or failed, keeps no body: its links hold live tokens (verify,
# reset, invitation) that only its recipient may read.
NO_BODY = {"text_body": None, "html_body": None}


def backoff(base: float, attempts: int) -> float:
    """Seconds to wait after the `attempts`-th failed try (1, 2, ...): doubling, capped."""
    return float(min(MAX_BACKOFF, base * 2 ** max(0, attempts - 1)))


class MailSender:
    def __init__(self, engine: AsyncEngine, server: SmtpServer, *, retry_base: float,
                 max_attempts: int, poll_interval: float) -> None:
        self.engine, self.server = engine, server
        self.retry_base, self.max_attempts = retry_base, max_attempts
        self.poll_interval = poll_interval
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="mail-sender")

    def nudge(self) -> None:
        """A mail was committed by this process: look now rather than at the next poll."""
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                while await self.send_one():
                    pass
            except asyncio.CancelledError:
                raise
            except Exception:  # the database is away: the next poll tries again
                log.exception("mail sender: pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)
            self._wake.clear()

    async def send_one(self) -> bool:
        """Deliver the oldest due mail, if any; whether there was one."""
        box = t.mail_outbox
        async with self.engine.begin() as conn:
            row = (await conn.execute(
                select(box).where(box.c.status == PENDING, box.c.next_attempt_at <= func.now())
                .order_by(box.c.id).limit(1).with_for_update(skip_locked=True))).mappings().first()
            if row is None:
                return False
            await self._deliver(conn, row)
        return True

    async def _deliver(self, conn: AsyncConnection, row: Any) -> None:
        box = t.mail_outbox
        mail = Mail(row["app_uid"], row["mail_from"], row["mail_to"], row["subject"],
                    row["text_body"] or "", row["html_body"] or "")
        attempts = row["attempts"] + 1
        done = update(box).where(box.c.id == row["id"])
        try:
            await asyncio.wait_for(self.server.deliver(mail), self.server.timeout * 3)
        except (Temporary, TimeoutError) as exc:
            error = str(exc)[:MAX_ERROR_CHARS] or "timed out"
            if attempts >= self.max_attempts:
                await conn.execute(done.values(status=FAILED, attempts=attempts, error=error,
                                               **NO_BODY))
                return
            wait = backoff(self.retry_base, attempts)
            log.info("mail %s: temporary failure (%s), again in %.1fs", row["id"], error, wait)
            await conn.execute(done.values(
                attempts=attempts, error=error,
                next_attempt_at=func.now() + dt.timedelta(seconds=wait)))
            return
        except Permanent as exc:
            await conn.execute(done.values(status=FAILED, attempts=attempts,
                                           error=str(exc)[:MAX_ERROR_CHARS], **NO_BODY))
            return
        await conn.execute(done.values(status=SENT, attempts=attempts, error=None,
                                       sent_at=func.now(), **NO_BODY))


def start_mail_sender(settings: Settings, engine: AsyncEngine) -> MailSender | None:
    """The process's sender, started; None without `AUTHORIC_SMTP_URL` (the mailbox)."""
    if not settings.smtp_url:
        return None
    sender = MailSender(engine, SmtpServer.from_url(settings.smtp_url, settings.smtp_timeout),
                        retry_base=settings.mail_retry_base,
                        max_attempts=settings.mail_max_attempts,
                        poll_interval=settings.mail_poll_interval)
    sender.start()
    return sender
