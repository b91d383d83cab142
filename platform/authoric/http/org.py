"""`/{app}/org/...`: the token's org run by its members (sections 3a, 3b): members,
invitations, API keys; and `POST /{app}/auth/invitations/accept`.

Only a member's access token is taken here (an API key is a bearer on the table routes
only). Each route runs one transaction: the acting member and the memberships the request
touches are locked and read in it (tenancy/acting.py), the change is judged and written, and
its audit entry, naming the member as its actor, commits with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.accounts import org_invitations as invitations
from authoric.accounts.joining import AcceptInvitation, accept_invitation
from authoric.accounts.org_invitations import NewInvitation
from authoric.auth.principals import bearer
from authoric.auth.ratelimit import MAIL
from authoric.catalog.apps import find_app
from authoric.console import audit
from authoric.http.accounts import mail_committed, postbox, signed_bearer
from authoric.http.bodies import ERROR_RESPONSES, Body, TypedRoute
from authoric.http.context import services
from authoric.http.sessions import throttle
from authoric.tenancy import keys, org_members
from authoric.tenancy.acting import Acting, acting
from authoric.tenancy.grants import OrgGrants
from authoric.tenancy.keys import NewKey
from authoric.tenancy.models import Membership

router = APIRouter(tags=["org"], route_class=TypedRoute, responses=ERROR_RESPONSES)



@asynccontextmanager
async def as_member(request: Request, app: str, *targets: str,
                    writes: bool = False) -> AsyncIterator[tuple[AsyncConnection, Acting]]:
    """A transaction, and the token's member acting in it (their membership and the
    `targets`' locked)."""
    svc = services(request)
    claims = svc.tokens.access(bearer(request.headers.get("authorization")))
    async with svc.tx() as conn:
        yield conn, await acting(conn, svc.snapshots, claims, app, targets, writes=writes)


async def _record(conn: AsyncConnection, who: Acting, action: str, target: str,
                  details: dict[str, Any]) -> None:
    await audit.record(conn, who.app_uid, action, target, details, who.actor)


async def _listed(request: Request, app: str, grants: OrgGrants) -> dict[str, Any]:
    """The org's keys or invitations, as the calling member may read them."""
    async with as_member(request, app) as (conn, who):
        return {"items": await grants.member_lists(conn, who)}


async def _revoked(request: Request, app: str, grants: OrgGrants, ref: str) -> Response:
    """Revoke one of the org's keys or invitations as the calling member, and log it
    (`{noun}.delete` on `orgs/{org}/{noun}s/{ref}`) in the same transaction."""
    kind = grants.noun
    async with as_member(request, app, writes=True) as (conn, who):
        revoked = await grants.member_revokes(conn, who, ref)
        await _record(conn, who, f"{kind}.delete", f"orgs/{who.org_uid}/{kind}s/{ref}", revoked)
    return Response(status_code=204)


@router.get("/{app}/org/members")
async def list_members(request: Request, app: str, limit: str | None = None,
                       after: str | None = None) -> dict[str, Any]:
    async with as_member(request, app) as (conn, who):
        return await org_members.list_members(conn, who, limit, after)


@router.put("/{app}/org/members/{user}", dependencies=[Depends(signed_bearer)])
async def put_member(request: Request, app: str, user: str,
                     body: Body[Membership]) -> dict[str, Any]:
    async with as_member(request, app, user, writes=True) as (conn, who):
        membership = await org_members.change_roles(conn, who, user, body.roles)
        await _record(conn, who, "member.put", f"orgs/{who.org_uid}/members/{user}", membership)
        return membership


@router.delete("/{app}/org/members/{user}", status_code=204)
async def delete_member(request: Request, app: str, user: str) -> Response:
    async with as_member(request, app, user, writes=True) as (conn, who):
        removed = await org_members.remove(conn, who, user)
        await _record(conn, who, "member.delete", f"orgs/{who.org_uid}/members/{user}", removed)
    return Response(status_code=204)


@router.post("/{app}/org/keys", status_code=201, dependencies=[Depends(signed_bearer)])
async def create_key(request: Request, app: str, body: Body[NewKey]) -> dict[str, Any]:
    async with as_member(request, app, writes=True) as (conn, who):
        created = await keys.member_creates_key(conn, who, body)
        await _record(conn, who, "key.create", f"orgs/{who.org_uid}/keys/{created['uid']}",
                      created)
        return created


@router.get("/{app}/org/keys")
async def list_keys(request: Request, app: str) -> dict[str, Any]:
    return await _listed(request, app, keys.KEYS)


@router.delete("/{app}/org/keys/{key}", status_code=204)
async def delete_key(request: Request, app: str, key: str) -> Response:
    return await _revoked(request, app, keys.KEYS, key)


@router.post("/{app}/org/invitations", status_code=201, dependencies=[Depends(signed_bearer)])
async def create_invitation(request: Request, app: str,
                            body: Body[NewInvitation]) -> dict[str, Any]:
    svc = services(request)
    async with as_member(request, app, writes=True) as (conn, who):
        invitation, token = await invitations.member_invites(conn, who, body)
        await send_invitation(request, conn, who.app_uid, who.org_uid, invitation, token)
        await _record(conn, who, "invitation.create",
                      f"orgs/{who.org_uid}/invitations/{invitation['uid']}", invitation)
    mail_committed(svc)
    return invitation


async def send_invitation(request: Request, conn: AsyncConnection, app_uid: Any, org_uid: Any,
                          invitation: dict[str, Any], token: str) -> None:
    """Queue the invitation's mail in the transaction that makes it."""
    app_row = await find_app(conn, str(app_uid))
    org_name = await invitations.org_name(conn, org_uid)
    await postbox(request).queue(conn, app_row, "invite", invitation["email"], token,
                                 org=org_name)


@router.get("/{app}/org/invitations")
async def list_invitations(request: Request, app: str) -> dict[str, Any]:
    return await _listed(request, app, invitations.INVITATIONS)


@router.delete("/{app}/org/invitations/{invitation}", status_code=204)
async def delete_invitation(request: Request, app: str, invitation: str) -> Response:
    return await _revoked(request, app, invitations.INVITATIONS, invitation)


@router.post("/{app}/auth/invitations/accept")
async def accept(request: Request, app: str, body: Body[AcceptInvitation]) -> dict[str, Any]:
    await throttle(request, app, None, MAIL)
    svc = services(request)
    header = request.headers.get("authorization")
    signed_in = svc.tokens.access(bearer(header)) if header else None
    async with svc.tx() as conn:
        return await accept_invitation(conn, svc.jwt_secret, await find_app(conn, app), body,
                                       signed_in, request.headers.get("user-agent"))
