"""Policy preview (dry run): what one member would see of one table with a role as saved and
as drafted, and the difference. Nothing is saved.

Both sides are judged by the code a real request runs: `policy.decision.decide` on an app
snapshot (the saved one, and a copy whose roles and enforcer carry the draft in place of the
saved role), and the decision's own row clause (`Decision.rows`) in one counting statement.
The member's other roles count on both sides, and the member is judged as holding the
previewed role whether or not they hold it today (so a grant can be tried before it is
given). A role that is not saved yet is a 404 (contract section 2a).

Operation switches are not part of a role, so they do not enter the preview: it shows what
the role does when the operations are on.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import and_, false, func, not_, select
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.names import check_name
from authoric.catalog.roles import ACTIONS, RoleDef, check_role
from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.db import tables as t
from authoric.errors import NotFound
from authoric.plan.access import with_draft_role
from authoric.plan.plan import governed_rows
from authoric.policy.decision import PolicyBroken, decide
from authoric.policy.principal import Principal
from authoric.tenancy.service import check_against_tables

DEFAULT_LIMIT, MAX_LIMIT = 100, 1000


class PreviewRequest(BaseModel):
    """The body: the draft is parsed as `PUT .../roles/{role}` parses a role."""

    model_config = ConfigDict(extra="forbid")

    draft: RoleDef
    user: str
    org: str
    table: str
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)


class PreviewSide(BaseModel):
    """What the member gets of the table on one side: how many rows they see, the columns
    redacted for them, and the actions they may take."""

    model_config = ConfigDict(extra="forbid")

    visible: int
    redacted: list[str]
    actions: list[str]


class Preview(BaseModel):
    """The answer: both sides, and what changes from the saved role to the draft (`gained` and
    `lost`: row uids, at most `limit` each); whether the role is saved, and held by the member
    today."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    saved: PreviewSide
    draft: PreviewSide
    gained: list[str]
    lost: list[str]
    redacted_now: list[str] = Field(alias="redactedNow")
    revealed_now: list[str] = Field(alias="revealedNow")
    actions_granted: list[str] = Field(alias="actionsGranted")
    actions_revoked: list[str] = Field(alias="actionsRevoked")
    role_saved: bool = Field(alias="roleSaved")
    role_held: bool = Field(alias="roleHeld")


def check_request(role: str, req: PreviewRequest, snapshot: AppSnapshot) -> None:
    """A role name PUT would take (422), of a saved role (404, contract section 2a), and a
    draft that passes the checks a PUT of the role makes (422)."""
    check_name(role, "role")
    if role not in snapshot.roles:
        raise NotFound("no such role: save it before previewing a change to it", {"role": role})
    check_role(req.draft)
    check_against_tables(req.draft, snapshot)


@dataclass(frozen=True)
class Side:
    """What the member gets on one side: the rows clause, redacted columns, granted actions."""

    rows: ColumnElement[bool]
    redacted: list[str]
    actions: list[str]


def _side(snapshot: AppSnapshot, principal: Principal, table: CompiledTable) -> Side:
    granted: list[str] = []
    for action in ACTIONS:
        try:
            if decide(snapshot, principal, table, action).allowed:
                granted.append(action)
        except PolicyBroken:
            pass  # a policy that no longer compiles grants nothing (fail closed)
    try:
        listing = decide(snapshot, principal, table, "read_list")
        rows = governed_rows(table, listing, principal) if listing.allowed else false()
        redacted = sorted(decide(snapshot, principal, table, "read").redacted)
    except PolicyBroken:
        rows, redacted = false(), sorted(c.name for c in table.definition.columns)
    return Side(func.coalesce(rows, false()), redacted, granted)


async def _member(conn: AsyncConnection, snapshot: AppSnapshot, role: str,
                  req: PreviewRequest) -> tuple[Principal, bool]:
    """The member as a request would see them, holding `role` besides their own roles;
    and whether they hold it today."""
    try:
        user_uid, org_uid = uuid.UUID(req.user), uuid.UUID(req.org)
    except ValueError as exc:
        raise NotFound("the user is not a member of this org",
                       {"user": req.user, "org": req.org}) from exc
    m, u = t.members, t.users
    row = (await conn.execute(
        select(m.c.roles, u.c.email).select_from(m.join(u, u.c.uid == m.c.user_uid))
        .where(and_(m.c.app_uid == snapshot.uid, m.c.org_uid == org_uid,
                    m.c.user_uid == user_uid)))).first()
    if row is None:
        raise NotFound("the user is not a member of this org", {"user": req.user, "org": req.org})
    roles = tuple(sorted({*row.roles, role}))
    return Principal(snapshot.uid, user_uid, org_uid, row.email, roles), role in row.roles


async def _uids(conn: AsyncConnection, table: CompiledTable, where: Any, limit: int) -> list[str]:
    uid = table.table.c.uid
    found = await conn.execute(select(uid).where(where).order_by(uid).limit(limit))
    return [str(u) for u in found.scalars()]


async def preview(conn: AsyncConnection, snapshot: AppSnapshot, role: str,
                  req: PreviewRequest) -> dict[str, Any]:
    check_request(role, req, snapshot)
    table = snapshot.table(req.table)
    member, held = await _member(conn, snapshot, role, req)
    saved = _side(snapshot, member, table)
    draft = _side(with_draft_role(snapshot, role, req.draft), member, table)
    counts = (await conn.execute(select(
        func.count().filter(saved.rows), func.count().filter(draft.rows),
    ).select_from(table.table).where(table.table.c.org_uid == member.org_uid))).one()
    gained = await _uids(conn, table, and_(draft.rows, not_(saved.rows)), req.limit)
    lost = await _uids(conn, table, and_(saved.rows, not_(draft.rows)), req.limit)
    return {
        "saved": {"visible": counts[0], "redacted": saved.redacted, "actions": saved.actions},
        "draft": {"visible": counts[1], "redacted": draft.redacted, "actions": draft.actions},
        "gained": gained, "lost": lost,
        "redactedNow": sorted(set(draft.redacted) - set(saved.redacted)),
        "revealedNow": sorted(set(saved.redacted) - set(draft.redacted)),
        "actionsGranted": [a for a in draft.actions if a not in saved.actions],
        "actionsRevoked": [a for a in saved.actions if a not in draft.actions],
        "roleSaved": role in snapshot.roles,
        "roleHeld": held,
    }
