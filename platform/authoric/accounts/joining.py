"""Accepting an invitation (`POST /{app}/auth/invitations/accept`, section 3a): the mailed
token opens the invitation once, and its address joins the org with the invitation's roles.

- No account for the address: one is made with `password`, verified (the mail proved it).
- An account exists: the caller is signed in as it (a bearer resolved as accounts.caller
  does: its session or membership still live, never a view-as token), or gives its password.
Works whatever the app's `signUp` is: the invitation is the operator's or a member's consent.
Everything happens in one transaction: a wrong password leaves the invitation unspent.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric.accounts.caller import AccountCaller
from authoric.accounts.models import Password
from authoric.accounts.org_invitations import redeem
from authoric.accounts.service import check_password
from authoric.auth.passwords import hash_password, verify_password
from authoric.auth.sessions import issue
from authoric.catalog.apps import app_settings, bump_version
from authoric.console import audit
from authoric.db import tables as t
from authoric.errors import Conflict, Unauthenticated, ValidationFailed
from authoric.tenancy.acting import member_actor
from authoric.tenancy.service import insert_user


class AcceptInvitation(BaseModel):
    """`POST /{app}/auth/invitations/accept`."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(max_length=200)
    password: Password | None = None


async def accept_invitation(conn: AsyncConnection, secret: str, app: Any,
                            body: AcceptInvitation, signed_in: AccountCaller | None,
                            user_agent: str | None) -> dict[str, Any]:
    """200's token pair for the invitation's org; 400 `invalid_token`, 401 for an existing
    account without its bearer or password, 409 for an address already a member there."""
    invitation = await redeem(conn, app["uid"], body.token)
    user = (await conn.execute(select(t.users).where(
        t.users.c.app_uid == app["uid"], t.users.c.email == invitation.email))).first()
    if user is None:
        user_uid = await _new_verified_user(conn, app, invitation.email, body.password)
    else:
        user_uid = user.uid
        await _prove_account(user, body.password, signed_in)
        if user.email_verified_at is None:  # the mail proved the address
            await conn.execute(update(t.users).where(t.users.c.uid == user_uid)
                               .values(email_verified_at=func.now()))
    already = await conn.scalar(select(t.members.c.uid).where(
        t.members.c.org_uid == invitation.org_uid, t.members.c.user_uid == user_uid))
    if already is not None:
        raise Conflict("this account is already a member of the org", {"org": str(invitation.org_uid)})
    membership = uuid7()
    await conn.execute(t.members.insert().values(
        app_uid=app["uid"], org_uid=invitation.org_uid, user_uid=user_uid,
        roles=list(invitation.roles), uid=membership))
    await bump_version(conn, app["uid"])
    await audit.record(conn, app["uid"], "invitation.accept",
                       f"orgs/{invitation.org_uid}/invitations/{invitation.uid}",
                       {"email": invitation.email, "roles": list(invitation.roles),
                        "user": str(user_uid)},
                       member_actor(user_uid, invitation.org_uid))
    return await issue(conn, secret, app, user_uid, invitation.org_uid, membership, uuid7(),
                       user_agent)


async def _new_verified_user(conn: AsyncConnection, app: Any, email: str,
                             password: str | None) -> Any:
    if password is None:
        raise ValidationFailed("a password is needed to create the account", {"errors": [
            {"field": "password", "message": "required for a new account"}]})
    check_password(app_settings(app["settings"]), password)
    # Verified: the invitation's mail proved the address.
    uid = await insert_user(conn, app["uid"], email, await hash_password(password),
                            verified=True)
    if uid is None:  # signed up meanwhile: accept again, as that account
        raise Conflict("an account with this email was just created", {"email": email})
    return uid


async def _prove_account(user: Any, password: str | None,
                         signed_in: AccountCaller | None) -> None:
    """401 unless the caller is signed in as `user` (a live session or membership: see
    accounts.caller) or knows its password."""
    if signed_in is not None and signed_in.user.uid == user.uid:
        return
    if password is not None and await verify_password(user.password_hash, password):
        return
    raise Unauthenticated("sign in as the invited account, or give its password")
