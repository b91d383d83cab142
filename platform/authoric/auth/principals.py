"""Turn a bearer access token and the app named in the URL into a Principal, in one query."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.auth import tokens
from authoric.db import tables as t
from authoric.errors import NotFound, Unauthenticated
from authoric.policy.principal import Principal


@dataclass(frozen=True)
class Authenticated:
    principal: Principal
    app: Any  # the app row
    version: int


def bearer(header: str | None) -> str:
    if not header:
        raise Unauthenticated("missing bearer token")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("expected `Authorization: Bearer <token>`")
    return token.strip()


def _app_where(ref: str) -> Any:
    try:
        return t.apps.c.uid == uuid.UUID(ref)
    except ValueError:
        return t.apps.c.name == ref


async def authenticate(conn: AsyncConnection, secret: str, header: str | None,
                       app_ref: str) -> Authenticated:
    """401 for a bad token, 404 for an unknown app, 401 for a token of another app or a
    membership that no longer exists. Roles come from the database, never from the token."""
    claims = tokens.decode(secret, bearer(header), tokens.ACCESS)
    m, u = t.members, t.users
    row = (await conn.execute(
        select(t.apps, m.c.roles, u.c.email)
        .select_from(t.apps.outerjoin(m, and_(
            m.c.app_uid == t.apps.c.uid, m.c.org_uid == claims.org_uid,
            m.c.user_uid == claims.user_uid)).outerjoin(u, u.c.uid == m.c.user_uid))
        .where(_app_where(app_ref))
    )).mappings().first()
    if row is None:
        raise NotFound("no such app", {"app": app_ref})
    if row["uid"] != claims.app_uid:
        raise Unauthenticated("token of another app")
    if row["roles"] is None:
        raise Unauthenticated("membership revoked")
    principal = Principal(row["uid"], claims.user_uid, claims.org_uid, row["email"],
                          tuple(row["roles"]), claims.expires_at, read_only=claims.read_only)
    return Authenticated(principal, row, row["version"])
