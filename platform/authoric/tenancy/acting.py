"""Who changes an org's memberships, invitations or keys, and what they may do (section 3a).

A member acting on their org is read inside the write's transaction: their membership, and
the target's when there is one, are locked (`SELECT ... FOR UPDATE`, in user order so two
requests never wait on each other crosswise) before anything is judged. Two concurrent
requests then cannot both pass on what the other is about to change: the second reads the
first's result. The operator (the admin token) is an actor too, above every ceiling.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.auth.principals import load_facts
from authoric.auth.tokens import Claims
from authoric.catalog.enforcer import granting_roles
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.db import tables as t
from authoric.errors import Forbidden, NotFound, Unauthenticated, read_only
from authoric.tenancy.ceiling import grantable, judge

OPERATOR_ACTOR: dict[str, Any] = {"kind": "operator"}


def member_actor(user_uid: uuid.UUID, org_uid: uuid.UUID) -> dict[str, Any]:
    """The audit log's actor for a member acting on their org."""
    return {"kind": "member", "user": str(user_uid), "org": str(org_uid)}


@dataclass(frozen=True)
class Acting:
    """A member acting on their own org, as of their locked membership, and the memberships
    their request touches (locked too): user uid → roles."""

    app_uid: uuid.UUID
    org_uid: uuid.UUID
    user_uid: uuid.UUID
    roles: tuple[str, ...]
    snapshot: AppSnapshot
    locked: dict[uuid.UUID, tuple[str, ...]] = field(default_factory=dict)

    @property
    def actor(self) -> dict[str, Any]:
        return member_actor(self.user_uid, self.org_uid)

    @property
    def grants(self) -> frozenset[str]:
        return grantable(self.roles, self.snapshot.roles)

    def require(self, resource: str, action: str) -> None:
        """403 unless one of the member's roles grants `resource:action`."""
        if not granting_roles(self.snapshot.enforcer, self.roles, resource, action):
            raise Forbidden(f"this needs the {resource}:{action} permission",
                            {"permission": f"{resource}:{action}"})

    def within_grants(self, *, target: Iterable[str] | None = None,
                      requested: Iterable[str] | None = None, own: bool = False) -> None:
        """403 `role_not_grantable` unless the ceiling allows it (tenancy/ceiling.py)."""
        verdict = judge(self.grants, target=target, requested=requested, own=own)
        if not verdict:
            raise Forbidden("that is beyond the roles you may hand out",
                            {"reason": verdict.reason, "roles": list(verdict.roles)})

    def member(self, ref: str) -> tuple[uuid.UUID, tuple[str, ...]]:
        """The org's member `ref` (locked by `acting`) and their roles; 404 for anyone else,
        a member of another org included."""
        uid = parse_uid(ref, "member")
        roles = self.locked.get(uid)
        if roles is None:
            raise NotFound("no such member", {"member": ref})
        return uid, roles


def parse_uid(ref: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(ref)
    except ValueError as exc:
        raise NotFound(f"no such {what}", {what: ref}) from exc


async def acting(conn: AsyncConnection, snapshots: SnapshotCache, claims: Claims, app_ref: str,
                 targets: Iterable[str] = (), *, writes: bool = False) -> Acting:
    """The token's member acting on their org, with their membership and the `targets`'
    (user uids of the same org; others are not locked, and are not members here) locked
    until the transaction ends when the request `writes` (a read locks nothing). 401 when
    the token's membership is gone; a "view as" token may read but never change anything
    (403)."""
    if writes and claims.read_only:
        raise read_only("change the org's members, invitations or keys")
    if claims.org_uid is None:
        await load_facts(conn, claims, app_ref)  # an account token: 404, 401 or 403 no_org
    assert claims.org_uid is not None
    wanted = {claims.user_uid}
    for ref in targets:
        # One that is not a uid is no member: `Acting.member` answers 404.
        with contextlib.suppress(ValueError):
            wanted.add(uuid.UUID(ref))
    m = t.members
    read = (select(m.c.user_uid, m.c.uid, m.c.roles)
            .where(m.c.org_uid == claims.org_uid, m.c.user_uid.in_(sorted(wanted)))
            .order_by(m.c.user_uid))
    # Only a write locks: a list judged on the last committed roles is as good as one judged
    # a moment later, and must not queue behind a member change in progress.
    rows = (await conn.execute(read.with_for_update() if writes else read)).all()
    locked = {r.user_uid: tuple(r.roles) for r in rows}
    own = next((r for r in rows if r.user_uid == claims.user_uid), None)
    if own is None or own.uid != claims.membership:
        raise Unauthenticated("membership revoked")
    # The app's version and the member's roles as of now (the membership is locked).
    facts = await load_facts(conn, claims, app_ref)
    snapshot = await snapshots.get(conn, claims.app_uid, facts.version)
    return Acting(claims.app_uid, claims.org_uid, claims.user_uid, tuple(own.roles), snapshot,
                  locked)
