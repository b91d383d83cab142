"""Invitations into an org (section 3a): sent by a member with `org.members:create` (roles
within their grants) or by the operator, listed, revoked, and redeemed once.

One pending invitation per (org, email): inviting the same address again replaces it (a new
link; the old one stops working), which is how an invitation is resent. The mailed token is
32 random bytes kept as its SHA-256 (accounts.mail_tokens' hash), valid 7 days; redeeming
deletes the invitation in the statement that checks it, so it works once.
"""

from __future__ import annotations

import datetime as dt
import secrets
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import and_, delete, select
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
from authoric.catalog.roles import ORG_MEMBERS
from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.errors import Conflict
from authoric.tenancy.acting import Acting
from authoric.tenancy.grants import OrgGrants
from authoric.tenancy.service import app_and_org, known_roles


class NewInvitation(BaseModel):
    """`POST /{app}/org/invitations`: who, and the roles they will hold."""

    model_config = ConfigDict(extra="forbid")

    email: str = Field(pattern=r"^\s*[^@\s]+@[^@\s]+\s*$", max_length=320)
    roles: list[str] = Field(max_length=100)

    @property
    def normalized_email(self) -> str:
        return self.email.strip().lower()


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
    return dt.datetime.fromtimestamp(clock.now(), dt.UTC)


def _view(row: Any) -> dict[str, Any]:
    return {"uid": str(row.uid), "email": row.email, "roles": list(row.roles),
            "invitedBy": None if row.invited_by is None else str(row.invited_by),
            "expiresAt": rfc3339(row.expires_at)}


async def invite(conn: AsyncConnection, app_uid: uuid.UUID, org_uid: uuid.UUID,
                 new: NewInvitation, invited_by: uuid.UUID | None) -> tuple[dict[str, Any], str]:
    """A new invitation (replacing a pending one to the same address) and its token, for
    the mail; 409 when the address is already a member's, 422 for unknown roles."""
    roles = await known_roles(conn, app_uid, new.roles)
    email = new.normalized_email
    member = await conn.scalar(select(t.members.c.user_uid).join(
        t.users, t.users.c.uid == t.members.c.user_uid).where(
        t.members.c.org_uid == org_uid, t.users.c.email == email))
    if member is not None:
        raise Conflict("this address is already a member of the org", {"email": email})
    i = t.invitations
    await conn.execute(delete(i).where(i.c.org_uid == org_uid, i.c.email == email))
    token = secrets.token_urlsafe(TOKEN_BYTES)
    expires = dt.datetime.fromtimestamp(clock.now() + LIFETIMES[INVITE], dt.UTC)
    row = (await conn.execute(i.insert().values(
        uid=uuid7(), app_uid=app_uid, org_uid=org_uid, email=email, roles=roles,
        invited_by=invited_by, token_hash=token_hash(token), expires_at=expires,
    ).returning(*i.c))).one()
    return _view(row), token


async def list_invitations(conn: AsyncConnection, org_uid: uuid.UUID) -> list[dict[str, Any]]:
    """The org's pending invitations (not yet accepted, revoked or expired)."""
    i = t.invitations
    rows = await conn.execute(select(i).where(i.c.org_uid == org_uid, i.c.expires_at > _now())
                              .order_by(i.c.uid))
    return [_view(r) for r in rows]


# A member lists and revokes invitations as any grant of roles in the org (tenancy/grants.py).
INVITATIONS = OrgGrants("invitation", ORG_MEMBERS, t.invitations, list_invitations, _view)


async def member_invites(conn: AsyncConnection, who: Acting,
                         new: NewInvitation) -> tuple[dict[str, Any], str]:
    INVITATIONS.member_may_issue(who, new.roles)
    return await invite(conn, who.app_uid, who.org_uid, new, who.user_uid)


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


async def org_name(conn: AsyncConnection, org_uid: uuid.UUID) -> str:
    return str(await conn.scalar(select(t.orgs.c.name).where(t.orgs.c.uid == org_uid)))


async def operator_invites(conn: AsyncConnection, app_ref: str, org_ref: str,
                           new: NewInvitation) -> tuple[Any, Any, dict[str, Any], str]:
    app, org = await app_and_org(conn, app_ref, org_ref)
    invitation, token = await invite(conn, app["uid"], org.uid, new, None)
    return app, org, invitation, token
