"""The mail outbox: every mail is a row written in the transaction of the change that causes
it (`enqueue_mail`), so a rolled-back change sends nothing and a crash after commit loses
nothing. The sender (mail.sender) delivers pending rows after commit.

Without an SMTP server the outbox is the app's mailbox (`GET /admin/apps/{app}/mail`): rows
are kept with their bodies, status `mailbox`. With one, a sent mail keeps `to`, `subject` and
`status` but not its body.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.plan.listing import newest_first, parse_id_cursor, parse_limit

PENDING, SENT, FAILED, MAILBOX = "pending", "sent", "failed", "mailbox"
DEFAULT_LIMIT, MAX_LIMIT = 50, 500


class MailItem(BaseModel):
    """A mail in the app's mailbox (contract section 3): its body only without SMTP; `error`,
    why the last attempt to send it failed, only once one has (`failed`, or `pending` again)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    at: str
    to: str
    subject: str
    text: str | None
    html: str | None
    status: Literal["mailbox", "pending", "sent", "failed"]
    error: str = Field(default_factory=str)  # absent until an attempt failed (never null)


class MailPage(BaseModel):
    """A page of the mailbox, newest first, and the cursor of the next (null: the last)."""

    model_config = ConfigDict(extra="forbid")

    items: list[MailItem]
    next: str | None


@dataclass(frozen=True)
class Mail:
    """One message, as composed (mail.compose): plain text and HTML."""

    app_uid: uuid.UUID
    mail_from: str
    to: str
    subject: str
    text: str
    html: str


async def enqueue_mail(conn: AsyncConnection, mail: Mail, *, smtp: bool) -> int:
    """Write `mail` to the outbox in the caller's transaction; it goes out (`smtp`: through
    the SMTP server; else into the app's mailbox) only if that transaction commits. The id."""
    row_id: int = await conn.scalar(t.mail_outbox.insert().values(
        app_uid=mail.app_uid, mail_from=mail.mail_from, mail_to=mail.to, subject=mail.subject,
        text_body=mail.text, html_body=mail.html, status=PENDING if smtp else MAILBOX,
    ).returning(t.mail_outbox.c.id))
    return row_id


async def list_mailbox(conn: AsyncConnection, app_uid: uuid.UUID, limit: str | None,
                       after: str | None) -> dict[str, Any]:
    """A page of the app's mail, newest first, and the cursor of the next page."""
    size, before = parse_limit(limit, DEFAULT_LIMIT, MAX_LIMIT), parse_id_cursor(after)
    return await newest_first(conn, t.mail_outbox, [t.mail_outbox.c.app_uid == app_uid],
                              size, before, _item)


def _item(row: Any) -> dict[str, Any]:
    item = {"id": str(row["id"]), "at": rfc3339(row["at"]), "to": row["mail_to"],
            "subject": row["subject"], "text": row["text_body"], "html": row["html_body"],
            "status": row["status"]}
    if row["error"] is not None:
        item["error"] = row["error"]
    return item
