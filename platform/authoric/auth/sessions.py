"""Sessions: password login, refresh-token rotation with family revocation on reuse, logout.

A session is a refresh-token family. A user with no membership who signs in without `org`
gets an account session (no org; contract section 3). Where the app requires verified email
addresses, a user whose address is not verified gets 403 `email_not_verified`.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric import clock
from authoric.auth import tokens
from authoric.auth.credentials import Login, RefreshToken
from authoric.auth.passwords import verify_password
from authoric.catalog.apps import app_settings, find_app
from authoric.db import tables as t
from authoric.errors import Forbidden, Unauthenticated, ValidationFailed

BAD_LOGIN = "wrong email or password"
USER_AGENT_CHARS = 300  # kept of a session's User-Agent


Transaction = Callable[[], AbstractAsyncContextManager[AsyncConnection]]


async def login(tx: Transaction, secret: str, app_ref: str, body: Login,
                user_agent: str | None = None) -> dict[str, Any]:
    """A token pair for the email and password (`tx` opens a transaction). The password is
    checked between two short transactions, never inside one: Argon2 takes a few hundred
    milliseconds of CPU, and a burst of sign-ins must not hold every pooled connection while
    it runs."""
    async with tx() as conn:
        app = await find_app(conn, app_ref)
        user = (await conn.execute(select(t.users).where(
            t.users.c.app_uid == app["uid"],
            t.users.c.email == body.email.strip().lower()))).first()
    if not await verify_password(user.password_hash if user else None, body.password) \
            or user is None:
        raise Unauthenticated(BAD_LOGIN)
    if (user.email_verified_at is None
            and app_settings(app["settings"]).email_verification == "required"):
        raise Forbidden("the email address is not verified yet",
                        {"reason": "email_not_verified"})
    async with tx() as conn:
        org_uid, membership = await _login_org(conn, user.uid, body.org)
        await _purge_expired(conn)
        return await issue(conn, secret, app, user.uid, org_uid, membership, uuid7(),
                           user_agent)


async def _login_org(conn: AsyncConnection, user_uid: uuid.UUID,
                     org: str | None) -> tuple[uuid.UUID | None, uuid.UUID | None]:
    """The org to log in to, and the membership's uid; (None, None) for an account session,
    when the user belongs to no org."""
    orgs = dict((await conn.execute(select(t.members.c.org_uid, t.members.c.uid).where(
        t.members.c.user_uid == user_uid))).tuples().all())
    if org is None:
        if len(orgs) == 1:
            return next(iter(orgs.items()))
        if not orgs:
            return None, None
        raise ValidationFailed("`org` is required: the user belongs to several orgs or none",
                               {"field": "org"})
    try:
        wanted = uuid.UUID(org)
    except ValueError as exc:
        raise Unauthenticated(BAD_LOGIN) from exc
    if wanted not in orgs:
        raise Unauthenticated(BAD_LOGIN)
    return wanted, orgs[wanted]


async def issue(conn: AsyncConnection, secret: str, app: Any, user_uid: uuid.UUID,
                org_uid: uuid.UUID | None, membership: uuid.UUID | None, family: uuid.UUID,
                user_agent: str | None = None) -> dict[str, Any]:
    """A token pair of session `family` (a new uuid7: a new session), for `org_uid` and its
    `membership`, or for no org (an account token: both None)."""
    settings = app_settings(app["settings"])
    now = clock.now()
    refresh_jti = uuid7()
    refresh_exp = now + settings.refresh_token_ttl
    await conn.execute(t.refresh_tokens.insert().values(
        jti=refresh_jti, family=family, app_uid=app["uid"], user_uid=user_uid, org_uid=org_uid,
        expires_at=dt.datetime.fromtimestamp(refresh_exp, dt.UTC),
        user_agent=(user_agent or "")[:USER_AGENT_CHARS] or None))
    access = tokens.Claims(app["uid"], user_uid, org_uid, uuid7(),
                           now + settings.access_token_ttl, tokens.ACCESS, membership=membership,
                           session=family)
    refresh = tokens.Claims(app["uid"], user_uid, org_uid, refresh_jti, refresh_exp,
                            tokens.REFRESH)
    return {
        "access_token": tokens.encode(secret, access),
        "refresh_token": tokens.encode(secret, refresh),
        "token_type": "Bearer",
        "expires_in": settings.access_token_ttl,
    }


def _refresh_claims(secret: str, app: Any, body: RefreshToken) -> tokens.Claims:
    try:
        claims = tokens.decode(secret, body.refresh_token, tokens.REFRESH)
    except Unauthenticated:
        raise
    except Exception as exc:  # an expired refresh token is simply not valid any more
        raise Unauthenticated("invalid refresh token") from exc
    if claims.app_uid != app["uid"]:
        raise Unauthenticated("token of another app")
    return claims


async def refresh(conn: AsyncConnection, secret: str, app: Any,
                  body: RefreshToken) -> dict[str, Any]:
    claims = _refresh_claims(secret, app, body)
    row = (await conn.execute(select(t.refresh_tokens).where(
        t.refresh_tokens.c.jti == claims.jti).with_for_update())).first()
    if row is None or row.revoked_at is not None:
        raise Unauthenticated("refresh token revoked")
    if row.spent_at is not None:
        # Reuse of a spent token means it leaked: the revocation must outlive this 401, so it
        # is committed here rather than rolled back with the failed request.
        await _revoke_family(conn, row.family)
        await conn.commit()
        raise Unauthenticated("refresh token reused; the session is revoked", {"revoked": True})
    membership = None
    if row.org_uid is not None:  # an account session has no membership to check
        membership = await conn.scalar(select(t.members.c.uid).where(
            t.members.c.org_uid == row.org_uid, t.members.c.user_uid == row.user_uid))
        if membership is None:
            raise Unauthenticated("membership revoked")
    await conn.execute(update(t.refresh_tokens).where(t.refresh_tokens.c.jti == row.jti)
                       .values(spent_at=func.now()))
    return await issue(conn, secret, app, row.user_uid, row.org_uid, membership, row.family,
                       row.user_agent)


async def logout(conn: AsyncConnection, secret: str, app: Any, body: RefreshToken) -> None:
    claims = _refresh_claims(secret, app, body)
    row = (await conn.execute(select(t.refresh_tokens.c.family).where(
        t.refresh_tokens.c.jti == claims.jti))).first()
    if row is not None:
        await _revoke_family(conn, row.family)


async def revoke_sessions(conn: AsyncConnection, user_uid: uuid.UUID,
                          org_uid: uuid.UUID | None = None,
                          keep: uuid.UUID | None = None) -> None:
    """End every session of the user (in `org_uid` only, when given; all but session `keep`,
    when given): their refresh tokens stop working, so a membership given back later does
    not revive them."""
    where = [t.refresh_tokens.c.user_uid == user_uid, t.refresh_tokens.c.revoked_at.is_(None)]
    if org_uid is not None:
        where.append(t.refresh_tokens.c.org_uid == org_uid)
    if keep is not None:
        where.append(t.refresh_tokens.c.family != keep)
    await conn.execute(update(t.refresh_tokens).where(*where).values(revoked_at=func.now()))


# Expired rows are dead weight: an expired refresh token is refused before its row is read.
# Each login deletes a bounded batch of them (index on expires_at; rows another login is
# already deleting are skipped, not waited for).
PURGE_BATCH = 100


async def _purge_expired(conn: AsyncConnection) -> None:
    expired = (select(t.refresh_tokens.c.jti).where(t.refresh_tokens.c.expires_at < func.now())
               .limit(PURGE_BATCH).with_for_update(skip_locked=True))
    await conn.execute(delete(t.refresh_tokens).where(t.refresh_tokens.c.jti.in_(expired)))


async def _revoke_family(conn: AsyncConnection, family: uuid.UUID) -> None:
    await conn.execute(update(t.refresh_tokens).where(
        t.refresh_tokens.c.family == family, t.refresh_tokens.c.revoked_at.is_(None),
    ).values(revoked_at=func.now()))
