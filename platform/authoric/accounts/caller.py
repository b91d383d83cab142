"""Who calls an account route: the bearer's user, with an org token or an account token.

An org token must still name a live membership (as on the table routes: `load_facts`). An
account token has no membership, so it must still name a live session: ending the session
(sign-out, a password reset, `DELETE /auth/sessions/{id}`) ends its account tokens at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.auth.principals import bearer, load_facts
from authoric.auth.tokens import Claims, VerifiedTokens
from authoric.catalog.apps import find_app
from authoric.db import tables as t
from authoric.errors import Unauthenticated, read_only


@dataclass(frozen=True)
class AccountCaller:
    app: Any  # the app's row
    claims: Claims
    user: Any  # the user's row
    roles: tuple[str, ...]  # in the token's org; () for an account token


async def account_caller(conn: AsyncConnection, verified: VerifiedTokens, header: str | None,
                         app_ref: str) -> AccountCaller:
    """The caller of an account route: 401 for a bad, revoked or other app's token, 404 for
    an unknown app, 403 for a read-only ("view as") token."""
    claims = verified.access(bearer(header))
    app = await find_app(conn, app_ref)
    if app["uid"] != claims.app_uid:
        raise Unauthenticated("token of another app")
    if claims.read_only:
        raise read_only("act on the account")
    roles: tuple[str, ...] = ()
    if claims.org_uid is not None:
        roles = (await load_facts(conn, claims, app_ref)).roles or ()
    elif not await _session_is_live(conn, claims):
        raise Unauthenticated("the session has ended")
    user = (await conn.execute(select(t.users).where(
        t.users.c.uid == claims.user_uid, t.users.c.app_uid == app["uid"]))).first()
    if user is None:
        raise Unauthenticated("no such user")
    return AccountCaller(app, claims, user, roles)


async def _session_is_live(conn: AsyncConnection, claims: Claims) -> bool:
    rt = t.refresh_tokens
    live = await conn.scalar(select(exists().where(
        rt.c.family == claims.session, rt.c.user_uid == claims.user_uid,
        rt.c.revoked_at.is_(None))))
    return bool(live)
