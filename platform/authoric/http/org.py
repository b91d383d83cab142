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
from authoric.accounts.caller import account_caller
from authoric.accounts.joining import AcceptInvitation, accept_invitation
from authoric.accounts.org_invitations import NewInvitation
from authoric.auth.principals import bearer
from authoric.auth.ratelimit import INVITATIONS, MAIL
from authoric.catalog.apps import find_app
from authoric.console import audit
from authoric.http.accounts import mail_committed, postbox, signed_bearer
from authoric.http.bodies import ERROR_RESPONSES, Body, TypedRoute
from authoric.http.context import services
from authoric.http.sessions import throttle, throttle_bearer
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


def _grant_routes(grants: OrgGrants, path: str) -> None:
    """`GET /{app}/org/{path}` (the org's keys or invitations, as the calling member may read
    them) and `DELETE /{app}/org/{path}/{uid}` (revoke one as the calling member, logged as
    `{noun}.delete` on `orgs/{org}/{path}/{uid}` in the same transaction): one pair per kind
    of grant, the same steps for both."""
    async def listed(request: Request, app: str) -> dict[str, Any]:
        async with as_member(request, app) as (conn, who):
            return {"items": await grants.member_lists(conn, who)}

    async def revoked(request: Request, app: str, uid: str) -> Response:
        async with as_member(request, app, writes=True) as (conn, who):
            gone = await grants.member_revokes(conn, who, uid)
            await _record(conn, who, f"{grants.noun}.delete", f"orgs/{who.org_uid}/{path}/{uid}",
                          gone)
        return Response(status_code=204)

    router.add_api_route(f"/{{app}}/org/{path}", listed, methods=["GET"], name=f"list_{path}")
    router.add_api_route(f"/{{app}}/org/{path}/{{uid}}", revoked, methods=["DELETE"],
                         status_code=204, name=f"delete_{path}")


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


_grant_routes(keys.KEYS, "keys")


@router.post("/{app}/org/invitations", status_code=201, dependencies=[Depends(signed_bearer)])
async def create_invitation(request: Request, app: str,
                            body: Body[NewInvitation]) -> dict[str, Any]:
    await throttle(request, app, body.email, MAIL)
    await throttle_bearer(request, app, INVITATIONS)
    svc = services(request)
    async with as_member(request, app, writes=True) as (conn, who):
        invitation = await invitations.member_invites(conn, who, body, postbox(request))
        await _record(conn, who, "invitation.create",
                      f"orgs/{who.org_uid}/invitations/{invitation['uid']}", invitation)
    mail_committed(svc)
    return invitation


_grant_routes(invitations.INVITATIONS, "invitations")


@router.post("/{app}/auth/invitations/accept")
async def accept(request: Request, app: str, body: Body[AcceptInvitation]) -> dict[str, Any]:
    await throttle(request, app, None, MAIL)
    svc = services(request)
    header = request.headers.get("authorization")
    async with svc.tx() as conn:
        # A bearer proves the account only as a live caller of it (a revoked session or
        # membership is 401, a view-as token 403), never by its signature alone.
        caller = await account_caller(conn, svc.tokens, header, app) if header else None
        return await accept_invitation(conn, svc.jwt_secret, await find_app(conn, app), body,
                                       caller, request.headers.get("user-agent"))
