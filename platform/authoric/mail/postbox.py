"""What a request needs to queue an account mail, and the one call that queues it.

`Postbox.queue(conn, app, kind, to, token)` composes the `kind` mail (mail.compose: the app's
wording, the link for `token`) and writes it to the outbox in the caller's transaction
(mail.outbox.enqueue_mail): it goes out only if that transaction commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.mail.compose import Kind, compose_mail, mail_link
from authoric.mail.outbox import Mail, enqueue_mail, outbox_row


@dataclass(frozen=True)
class Postbox:
    smtp: bool  # an SMTP server is configured; else mail goes to the app's mailbox
    default_from: str  # the sender of apps without `mailFrom`
    base_url: str  # the server's address, for links to its own pages

    async def queue(self, conn: AsyncConnection, app: Any, kind: Kind, to: str,
                    token: str | None = None, **values: str) -> int:
        """Queue the `kind` mail to `to` (linking to `token`'s page when given) in the
        caller's transaction; the outbox row's id."""
        return await enqueue_mail(conn, self.compose(app, kind, to, token, **values),
                                  smtp=self.smtp)

    def compose(self, app: Any, kind: Kind, to: str, token: str | None = None,
                **values: str) -> Mail:
        """The `kind` mail to `to`, as `queue` would write it."""
        link = mail_link(app, kind, token, self.base_url) if token is not None else ""
        return compose_mail(app, kind, to, link, self.default_from, **values)

    def row(self, mail: Mail) -> dict[str, Any]:
        """`mail`'s outbox columns, for a statement that writes it itself."""
        return outbox_row(mail, smtp=self.smtp)
