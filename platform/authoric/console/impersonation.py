"""Impersonation ("view as"): a short-lived, read-only access token for one member.

The token is an ordinary access token of that user in that org (so every read and the
subscribe feed judge it exactly as the member's own token, roles looked up per request)
with one more claim, `ro`, that makes every write refuse it (`records.gate.admit`). No
refresh token is issued, and the refresh and logout routes take refresh tokens only.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric.auth import tokens
from authoric.catalog.types import rfc3339
from authoric.console import audit
from authoric.db import tables as t
from authoric.errors import NotFound

MAX_TTL, DEFAULT_TTL = 900, 600


class ImpersonationRequest(BaseModel):
    """`{"user", "org", "ttl"}`: uids as strings (an unknown one is a 404 later), ttl in seconds."""

    model_config = ConfigDict(extra="forbid")

    user: str
    org: str
    ttl: int = Field(default=DEFAULT_TTL, ge=1, le=MAX_TTL)


class AccessToken(BaseModel):
    """The member's read-only access token (RFC 6749 names); `expires_in` in seconds."""

    model_config = ConfigDict(extra="forbid")

    access_token: str
    token_type: Literal["Bearer"]
    expires_in: int


def _uid(ref: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(ref)
    except ValueError:
        return None


async def impersonate(conn: AsyncConnection, secret: str, app_uid: uuid.UUID,
                      req: ImpersonationRequest) -> dict[str, Any]:
    """Mint the token (404 when the user is not a member of the org) and audit it."""
    user_uid, org_uid = _uid(req.user), _uid(req.org)
    m, u = t.members, t.users
    member = None if user_uid is None or org_uid is None else (await conn.execute(
        select(u.c.email, m.c.uid).select_from(m.join(u, u.c.uid == m.c.user_uid)).where(and_(
            m.c.app_uid == app_uid, m.c.org_uid == org_uid, m.c.user_uid == user_uid)))).first()
    if member is None or user_uid is None or org_uid is None:
        raise NotFound("the user is not a member of this org",
                       {"user": req.user, "org": req.org})
    expires_at = int(time.time()) + req.ttl
    email = member.email
    claims = tokens.Claims(app_uid, user_uid, org_uid, uuid7(), expires_at, tokens.ACCESS,
                           read_only=True, membership=member.uid)
    token = tokens.encode(secret, claims)
    await audit.record(conn, app_uid, "impersonate", f"users/{user_uid}", {
        "user": str(user_uid), "org": str(org_uid), "email": email, "ttl": req.ttl,
        "expiresAt": rfc3339(dt.datetime.fromtimestamp(expires_at, dt.UTC))})
    return {"access_token": token, "token_type": "Bearer", "expires_in": req.ttl}
