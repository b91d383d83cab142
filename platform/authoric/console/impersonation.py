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
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric.auth import tokens
from authoric.catalog.types import rfc3339
from authoric.console import audit
from authoric.db import tables as t
from authoric.errors import NotFound, ValidationFailed

MAX_TTL, DEFAULT_TTL = 900, 600


@dataclass(frozen=True)
class ImpersonationRequest:
    user: str
    org: str
    ttl: int


def parse_request(body: Any) -> ImpersonationRequest:
    """`{"user", "org", "ttl"}`; 422 naming the field that is missing or wrong."""
    if not isinstance(body, dict):
        raise ValidationFailed("a JSON object with `user` and `org` is expected")
    unknown = sorted(set(body) - {"user", "org", "ttl"})
    if unknown:
        raise ValidationFailed(f"unknown fields: {', '.join(unknown)}", {"fields": unknown})
    for key in ("user", "org"):
        if not isinstance(body.get(key), str):
            raise ValidationFailed(f"`{key}` is a uid", {"field": key})
    ttl = body.get("ttl", DEFAULT_TTL)
    if type(ttl) is not int or not 1 <= ttl <= MAX_TTL:
        raise ValidationFailed(f"`ttl` is a whole number of seconds from 1 to {MAX_TTL}",
                               {"field": "ttl", "max": MAX_TTL})
    return ImpersonationRequest(body["user"], body["org"], ttl)


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
    email = None if user_uid is None or org_uid is None else await conn.scalar(
        select(u.c.email).select_from(m.join(u, u.c.uid == m.c.user_uid)).where(and_(
            m.c.app_uid == app_uid, m.c.org_uid == org_uid, m.c.user_uid == user_uid)))
    if email is None or user_uid is None or org_uid is None:
        raise NotFound("the user is not a member of this org",
                       {"user": req.user, "org": req.org})
    expires_at = int(time.time()) + req.ttl
    claims = tokens.Claims(app_uid, user_uid, org_uid, uuid7(), expires_at, tokens.ACCESS,
                           read_only=True)
    token = tokens.encode(secret, claims)
    await audit.record(conn, app_uid, "impersonate", f"users/{user_uid}", {
        "user": str(user_uid), "org": str(org_uid), "email": email, "ttl": req.ttl,
        "expiresAt": rfc3339(dt.datetime.fromtimestamp(expires_at, dt.UTC))})
    return {"access_token": token, "token_type": "Bearer", "expires_in": req.ttl}
