"""Turn a bearer access token and the app named in the URL into a Principal.

Two ways, with the same answers:
- `authenticate`: one query for the app, the membership's roles and the email (paths that
  run several statements in one transaction);
- `FactsCache` + `load_facts`: the request path keeps the facts per (app, user, org) and has
  every statement re-check them (plan.guard); `load_facts` is the query that fills the cache
  on first use and gives the exact 404/401 when something is wrong.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.auth import tokens
from authoric.catalog.apps import app_where
from authoric.db import tables as t
from authoric.errors import Forbidden, NotFound, Unauthenticated
from authoric.plan.guard import Facts
from authoric.policy.principal import Principal


@dataclass(frozen=True)
class Authenticated:
    principal: Principal
    version: int  # the app's catalog version, as of the authenticating statement


def bearer(header: str | None) -> str:
    if not header:
        raise Unauthenticated("missing bearer token")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("expected `Authorization: Bearer <token>`")
    return token.strip()


async def authenticate(conn: AsyncConnection, secret: str, header: str | None,
                       app_ref: str) -> Authenticated:
    """401 for a bad token, 404 for an unknown app, 401 for a token of another app or a
    membership that no longer exists. Roles come from the database, never from the token."""
    claims = tokens.decode(secret, bearer(header), tokens.ACCESS)
    facts = await load_facts(conn, claims, app_ref)
    assert facts.roles is not None and claims.org_uid is not None  # load_facts refuses both
    return Authenticated(principal_of(claims, facts), facts.version)


def principal_of(claims: tokens.Claims, facts: Facts) -> Principal:
    """Who a token's bearer is, with roles and email from the facts (never from the token)."""
    assert claims.org_uid is not None  # load_facts refuses an account token
    return Principal(claims.app_uid, claims.user_uid, claims.org_uid, facts.email,
                     facts.roles or (), claims.expires_at, read_only=claims.read_only,
                     api_key=claims.api_key, membership=claims.membership)


def matches_app(ref: str, app_uid: uuid.UUID, facts: Facts) -> bool:
    """Whether the URL's `{app}` names the app the facts belong to (by name or by uid)."""
    if ref == facts.app_name:
        return True
    try:
        return uuid.UUID(ref) == app_uid
    except ValueError:
        return False


async def load_facts(conn: AsyncConnection, claims: tokens.Claims, app_ref: str) -> Facts:
    """The current facts for a verified token and the URL's app: 404 for an unknown app,
    401 for a token of another app or a membership that no longer exists (the token's own
    membership: one removed and given back is another)."""
    return await member_facts(conn, app_ref, claims.app_uid, claims.user_uid, claims.org_uid,
                              claims.membership)


async def member_facts(conn: AsyncConnection, app_ref: str, app_uid: uuid.UUID,
                       user_uid: uuid.UUID, org_uid: uuid.UUID | None,
                       membership: uuid.UUID | None, *, any_membership: bool = False) -> Facts:
    """The current facts of a user (or key) in one org of the app `app_ref` names: the one
    loader of roles for requests (through `load_facts`) and the SDK (`any_membership`: it
    holds no token naming one). 404 for an unknown app, 401 for another app (`app_uid`) or
    a membership that is gone, 403 for no org."""
    m, u = t.grantees(), t.users  # members and API keys (section 3b): one loader
    same = [] if any_membership else [m.c.uid == membership]
    row = (await conn.execute(
        select(t.apps.c.uid, t.apps.c.name, t.apps.c.version, m.c.roles, u.c.email)
        .select_from(t.apps.outerjoin(m, and_(
            m.c.app_uid == t.apps.c.uid, m.c.org_uid == org_uid,
            m.c.user_uid == user_uid, *same,
        )).outerjoin(u, u.c.uid == m.c.user_uid))
        .where(app_where(app_ref))
    )).mappings().first()
    if row is None:
        raise NotFound("no such app", {"app": app_ref})
    if row["uid"] != app_uid:
        raise Unauthenticated("token of another app")
    if org_uid is None:
        raise no_org()
    return facts_or_refusal(Facts(row["version"], row["name"],
                                  None if row["roles"] is None else tuple(row["roles"]),
                                  row["email"]))


def no_org() -> Forbidden:
    """The answer to an account token (no org) on a route that acts in an org."""
    return Forbidden("this token belongs to no org: sign in to an org, or switch to one",
                     {"reason": "no_org"})


def facts_or_refusal(facts: Facts) -> Facts:
    if facts.roles is None:
        raise Unauthenticated("membership revoked")
    return facts


class FactsCache:
    """Last seen facts per (app, user, org); bounded, oldest first out. Never trusted alone:
    every statement planned from them checks them again."""

    def __init__(self, size: int = 50_000) -> None:
        self.size = size
        self._facts: dict[tuple[uuid.UUID, uuid.UUID, uuid.UUID], Facts] = {}

    def get(self, key: tuple[uuid.UUID, uuid.UUID, uuid.UUID]) -> Facts | None:
        return self._facts.get(key)

    def put(self, key: tuple[uuid.UUID, uuid.UUID, uuid.UUID], facts: Facts) -> None:
        if key not in self._facts and len(self._facts) >= self.size:
            self._facts.pop(next(iter(self._facts)))
        self._facts[key] = facts

    def forget(self, key: tuple[uuid.UUID, uuid.UUID, uuid.UUID]) -> None:
        self._facts.pop(key, None)
