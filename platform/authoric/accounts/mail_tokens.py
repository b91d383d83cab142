"""Tokens sent by mail (verify, reset; invitations keep their own, accounts.org_invitations).

A token is 32 random bytes (URL-safe base64 in the link); only its SHA-256 is kept. Redeeming
marks it used in the same statement that checks it (`UPDATE ... WHERE used_at IS NULL AND
expires_at > now RETURNING`), so two concurrent redemptions cannot both succeed. The lookup is
by the hash, so comparing never touches the secret itself. A used, expired and unknown token
get the same answer.

Where the answer must not tell a known address from an unknown one (sign-up with verification
required, resend, forgot), the token and its mail are written by one statement that does the
whole step if the address is known (or free, for sign-up) and writes nothing else otherwise:
`issue_and_mail_if_known`, `sign_up_and_mail`. Both sides then send the same statements.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import uuid
from typing import Any

from sqlalchemy import Select, delete, exists, func, literal, select, union_all, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric import clock
from authoric.db import tables as t
from authoric.errors import BadRequest

VERIFY, RESET, INVITE = "verify", "reset", "invite"
LIFETIMES = {VERIFY: 24 * 3600, RESET: 3600, INVITE: 7 * 24 * 3600}  # seconds
TOKEN_BYTES = 32
MAX_TOKEN_CHARS = 100  # a longer "token" is no token of ours; refused before hashing
PURGE_BATCH = 100


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def invalid_token() -> BadRequest:
    return BadRequest("the link is invalid, used or expired", {"reason": "invalid_token"})


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def new_mail_token() -> str:
    """A token for a mail's link: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(TOKEN_BYTES)


async def issue_and_mail_if_known(conn: AsyncConnection, app_uid: uuid.UUID, purpose: str,
                                  email: str, token: str, mail: dict[str, Any], *,
                                  unverified_only: bool = False) -> None:
    """If the app has a user with `email` (and, `unverified_only`, not verified yet): `token`
    issued to them for `purpose` (their earlier unused ones spent) and `mail` (outbox
    columns, composed for `token`) queued, in one statement; for any other address the same
    statement, which writes nothing. So a known and an unknown address cost the same round
    trips (and a bounded batch of expired tokens is purged either way): nothing in the time
    of forgot or resend tells them apart."""
    mt, u = t.mail_tokens, t.users
    known = select(u.c.uid).where(u.c.app_uid == app_uid, u.c.email == email, *(
        [u.c.email_verified_at.is_(None)] if unverified_only else [])).cte("known")
    spent = update(mt).where(mt.c.user_uid.in_(select(known.c.uid)), mt.c.purpose == purpose,
                             mt.c.used_at.is_(None)).values(used_at=func.now()).cte("spent")
    issued = _issued(app_uid, purpose, email, token, known)
    await conn.execute(insert(t.mail_outbox).from_select(
        list(mail), _mail_values(mail).select_from(known)).add_cte(spent, issued))
    await _purge_expired(conn)


async def sign_up_and_mail(conn: AsyncConnection, app_uid: uuid.UUID, email: str,
                           password_hash: str, token: str, verify: dict[str, Any],
                           taken: dict[str, Any]) -> None:
    """A sign-up with verification required, in one statement whatever the answer: a new
    user for `email`, `token` issued to them and the `verify` mail queued; or, the address
    being taken (even by a concurrent sign-up), the `taken` mail queued for its owner and
    nothing else. So a free and a taken address cost the same round trips (the hash was
    made for both) and the answer, the same either way, leaks nothing by time."""
    u = t.users
    made = insert(u).values(uid=uuid7(), app_uid=app_uid, email=email,
                            password_hash=password_hash).on_conflict_do_nothing(
        index_elements=[u.c.app_uid, u.c.email]).returning(u.c.uid).cte("made")
    issued = _issued(app_uid, VERIFY, email, token, made)
    await conn.execute(insert(t.mail_outbox).from_select(list(verify), union_all(
        _mail_values(verify).select_from(made),
        _mail_values(taken).where(~exists(select(made.c.uid))))).add_cte(issued))
    await _purge_expired(conn)


def _issued(app_uid: uuid.UUID, purpose: str, email: str, token: str, users: Any) -> Any:
    """A CTE issuing `token` for `purpose` to each user of the CTE `users` (a uid column):
    none, or the one the statement found or made."""
    mt = t.mail_tokens
    return insert(mt).from_select(
        ["hash", "app_uid", "purpose", "user_uid", "subject", "expires_at"],
        select(_bound(mt, "hash", token_hash(token)), _bound(mt, "app_uid", app_uid),
               _bound(mt, "purpose", purpose), users.c.uid, _bound(mt, "subject", email),
               _bound(mt, "expires_at", _at(clock.now() + LIFETIMES[purpose])))
        .select_from(users)).cte("issued")


def _mail_values(mail: dict[str, Any]) -> Select[Any]:
    """The outbox columns `mail` holds, as a SELECT of bound values (its FROM and WHERE are
    the caller's: whether the mail is written)."""
    box = t.mail_outbox
    return select(*(_bound(box, name, value) for name, value in mail.items()))


def _bound(table: Any, column: str, value: Any) -> Any:
    """`value` as a bound parameter of `table.column`'s type."""
    return literal(value, table.c[column].type)


async def redeem_mail_token(conn: AsyncConnection, app_uid: uuid.UUID, purpose: str,
                            token: str) -> Any:
    """The token's row (user_uid, subject, data), marked used by this very statement; 400
    `invalid_token` for a used, expired, unknown or other app's or purpose's token."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise invalid_token()
    mt = t.mail_tokens
    row = (await conn.execute(
        update(mt).where(mt.c.hash == token_hash(token), mt.c.app_uid == app_uid,
                         mt.c.purpose == purpose, mt.c.used_at.is_(None),
                         mt.c.expires_at > _at(clock.now()))
        .values(used_at=func.now())
        .returning(mt.c.user_uid, mt.c.subject, mt.c.data))).first()
    if row is None:
        raise invalid_token()
    return row


async def _purge_expired(conn: AsyncConnection) -> None:
    """A bounded batch of expired tokens goes with each new one (rows another transaction is
    deleting are skipped)."""
    expired = (select(t.mail_tokens.c.hash)
               .where(t.mail_tokens.c.expires_at < _at(clock.now() - 86_400))
               .limit(PURGE_BATCH).with_for_update(skip_locked=True))
    await conn.execute(delete(t.mail_tokens).where(t.mail_tokens.c.hash.in_(expired)))
