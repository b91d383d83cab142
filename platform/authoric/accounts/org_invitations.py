"""Invitations into an org (section 3a): sent by a member with `org.members:create` (roles
within their grants) or by the operator, listed, revoked, and redeemed once.

One pending invitation per (org, email): inviting the same address again replaces it (a new
link; the old one stops working), which is how an invitation is resent. A member replaces
only one they could revoke (its roles within their grants), so re-inviting never cancels
or downgrades someone else's invitation beyond their reach. The mailed token is
32 random bytes kept as its SHA-256 (accounts.mail_tokens' hash), valid 7 days; redeeming
deletes the invitation in the statement that checks it, so it works once.
"""

from __future__ import annotations

import datetime as dt
import secrets
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import ColumnElement, Text, and_, delete, func, literal, or_, select
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric import clock
from authoric.accounts.mail_tokens import (
    INVITE,
    LIFETIMES,
    MAX_TOKEN_CHARS,
    TOKEN_BYTES,
    invalid_token,
    token_hash,
)
from authoric.auth.emails import Email
from authoric.catalog.apps import find_app
from authoric.catalog.roles import ORG_MEMBERS
from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.errors import Conflict
from authoric.mail.postbox import Postbox
from authoric.tenancy.acting import Acting
from authoric.tenancy.grants import OrgGrants
from authoric.tenancy.service import app_and_org, known_roles


class NewInvitation(BaseModel):
    """`POST /{app}/org/invitations`: who, and the roles they will hold."""

    model_config = ConfigDict(extra="forbid")

    email: Email
    roles: list[str] = Field(max_length=100)


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


class InvitationView(BaseModel):
    """A pending invitation: who, the roles they will hold, who invited them (a user's uid;
    null: the operator) and when it expires."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    uid: str
    email: str
    roles: list[str]
    invited_by: str | None = Field(alias="invitedBy")
    expires_at: str = Field(alias="expiresAt")


class InvitationList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[InvitationView]


def _now() -> dt.datetime:
    return _at(clock.now())


def _view(row: Any) -> dict[str, Any]:
    return {"uid": str(row.uid), "email": row.email, "roles": list(row.roles),
            "invitedBy": None if row.invited_by is None else str(row.invited_by),
            "expiresAt": rfc3339(row.expires_at)}


async def invite(conn: AsyncConnection, app_uid: uuid.UUID, org_uid: uuid.UUID,
                 new: NewInvitation, who: Acting | None) -> tuple[dict[str, Any], str]:
    """A new invitation (replacing a pending one to the same address) and its token, for
    the mail; 409 when the address is already a member's, 422 for unknown roles. A member
    `who` (None: the operator) replaces only a pending invitation whose roles lie within
    their grants, as revoking it would need: 403 `role_not_grantable` otherwise."""
    roles = await known_roles(conn, app_uid, new.roles)
    email = new.email
    member = await conn.scalar(select(t.members.c.user_uid).join(
        t.users, t.users.c.uid == t.members.c.user_uid).where(
        t.members.c.org_uid == org_uid, t.users.c.email == email))
    if member is not None:
        raise Conflict("this address is already a member of the org", {"email": email})
    token = secrets.token_urlsafe(TOKEN_BYTES)
    i = t.invitations
    values = {"uid": uuid7(), "app_uid": app_uid, "org_uid": org_uid, "email": email,
              "roles": roles, "invited_by": None if who is None else who.user_uid,
              "token_hash": token_hash(token), "expires_at": _at(clock.now() + LIFETIMES[INVITE])}
    # One statement inserts or replaces, judging the pending one it replaces under its row
    # lock: two concurrent invitations to one address cannot slip one past the ceiling.
    replaced = {k: v for k, v in values.items() if k not in ("app_uid", "org_uid", "email")}
    row = (await conn.execute(insert(i).values(**values).on_conflict_do_update(
        index_elements=[i.c.org_uid, i.c.email], set_={**replaced, "created_at": func.now()},
        where=_replaceable_by(who)).returning(*i.c))).first()
    if row is None:
        assert who is not None  # the operator's upsert has no condition
        await _refuse_replacing(conn, who, org_uid, email)
    return _view(row), token


def _replaceable_by(who: Acting | None) -> ColumnElement[bool] | None:
    """Which pending invitation `who` may replace: any for the operator; for a member, one
    all of whose roles lie within their grants, or one that has expired (it opens nothing)."""
    if who is None:
        return None
    i = t.invitations
    grants = literal(sorted(who.grants), ARRAY(Text))
    return or_(i.c.roles.contained_by(grants), i.c.expires_at <= _now())


async def _refuse_replacing(conn: AsyncConnection, who: Acting, org_uid: uuid.UUID,
                            email: str) -> None:
    """403 `role_not_grantable` naming the pending invitation's roles beyond `who`'s grants."""
    i = t.invitations
    held = await conn.scalar(select(i.c.roles).where(i.c.org_uid == org_uid, i.c.email == email))
    who.within_grants(target=held or ())
    # Changed between the two statements (by someone else's write): ask again.
    raise Conflict("the invitation to this address changed meanwhile; try again",
                   {"email": email})


async def list_invitations(conn: AsyncConnection, org_uid: uuid.UUID) -> list[dict[str, Any]]:
    """The org's pending invitations (not yet accepted, revoked or expired)."""
    i = t.invitations
    rows = await conn.execute(select(i).where(i.c.org_uid == org_uid, i.c.expires_at > _now())
                              .order_by(i.c.uid))
    return [_view(r) for r in rows]


# A member lists and revokes invitations as any grant of roles in the org (tenancy/grants.py).
INVITATIONS = OrgGrants("invitation", ORG_MEMBERS, t.invitations, list_invitations, _view)


async def member_invites(conn: AsyncConnection, who: Acting, new: NewInvitation,
                         postbox: Postbox) -> dict[str, Any]:
    INVITATIONS.member_may_issue(who, new.roles)
    app = await find_app(conn, str(who.app_uid))
    return await _invite_and_mail(conn, app, who.org_uid, new, who, postbox)


async def _invite_and_mail(conn: AsyncConnection, app: Any, org_uid: uuid.UUID,
                           new: NewInvitation, who: Acting | None,
                           postbox: Postbox) -> dict[str, Any]:
    """The invitation (as `invite` makes it), its mail queued in the same transaction: it
    goes out only if the invitation commits. The mail names the org; the token is only in it."""
    invitation, token = await invite(conn, app["uid"], org_uid, new, who)
    await postbox.queue(conn, app, "invite", invitation["email"], token,
                        org=await _org_name(conn, org_uid))
    return invitation


async def redeem(conn: AsyncConnection, app_uid: uuid.UUID, token: str) -> Any:
    """The invitation `token` opens, deleted by this very statement (so it works once); 400
    `invalid_token` for a used, revoked, expired or unknown one, the same for all."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise invalid_token()
    i = t.invitations
    row = (await conn.execute(delete(i).where(
        i.c.token_hash == token_hash(token), i.c.app_uid == app_uid, i.c.expires_at > _now())
        .returning(*i.c))).first()
    if row is None:
        raise invalid_token()
    return row


async def pending_for(conn: AsyncConnection, app_uid: uuid.UUID,
                      email: str) -> list[dict[str, Any]]:
    """`[{"uid", "org", "orgName", "roles", "expiresAt"}]`: invitations waiting for `email`."""
    i, o = t.invitations, t.orgs
    rows = await conn.execute(
        select(i.c.uid, i.c.org_uid, o.c.name, i.c.roles, i.c.expires_at)
        .join(o, o.c.uid == i.c.org_uid)
        .where(and_(i.c.app_uid == app_uid, i.c.email == email, i.c.expires_at > _now()))
        .order_by(i.c.uid))
    return [{"uid": str(r.uid), "org": str(r.org_uid), "orgName": r.name,
             "roles": list(r.roles), "expiresAt": rfc3339(r.expires_at)} for r in rows]


async def _org_name(conn: AsyncConnection, org_uid: uuid.UUID) -> str:
    return str(await conn.scalar(select(t.orgs.c.name).where(t.orgs.c.uid == org_uid)))


async def operator_invites(conn: AsyncConnection, app_ref: str, org_ref: str,
                           new: NewInvitation, postbox: Postbox) -> dict[str, Any]:
    app, org = await app_and_org(conn, app_ref, org_ref)
    return await _invite_and_mail(conn, app, org.uid, new, None, postbox)
