"""`/admin`: apps, tables, orgs, users, members and roles, for the platform admin token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel

from authoric.accounts import org_invitations as invitations
from authoric.accounts.org_invitations import InvitationList, InvitationView, NewInvitation
from authoric.auth.admin import is_admin_token
from authoric.catalog import apps
from authoric.catalog.apps import AppChange, AppList, AppView, NewApp
from authoric.catalog.model import ColumnTypeName, TableChange, TableDef
from authoric.catalog.roles import RoleDef, RoleList, RoleView
from authoric.catalog.types import COLUMN_TYPES
from authoric.errors import Unauthenticated
from authoric.http.accounts import mail_committed, postbox
from authoric.http.answers import (
    MemberPage,
    MemberSet,
    MembershipList,
    OrgList,
    OrgView,
    UserList,
    UserView,
    declared,
)
from authoric.http.bodies import ERROR_RESPONSES, Body, TypedRoute
from authoric.http.context import Services, services
from authoric.tables import definitions
from authoric.tables.conversions import conversion_table
from authoric.tables.definitions import TableList, TableView
from authoric.tables.indexes import IndexList, IndexSpec, IndexView
from authoric.tenancy import keys
from authoric.tenancy import service as tenancy
from authoric.tenancy.keys import CreatedKey, KeyList, NewKey
from authoric.tenancy.models import Membership, NewOrg, NewUser


def require_admin(request: Request) -> Services:
    svc = services(request)
    if not is_admin_token(request.headers.get("authorization"), svc.admin_token):
        raise Unauthenticated("the admin token is required")
    return svc


router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(require_admin)],
                   route_class=TypedRoute, responses=ERROR_RESPONSES)

T = TypeVar("T")


async def _call(request: Request, service: Callable[..., Awaitable[T]], *args: Any) -> T:
    """One admin call: the service function in a transaction that commits before the answer."""
    async with services(request).tx() as conn:
        return await service(conn, *args)


async def _listed(request: Request, service: Callable[..., Awaitable[Any]],
                  *args: Any) -> dict[str, Any]:
    return {"items": await _call(request, service, *args)}


async def _deleted(request: Request, service: Callable[..., Awaitable[Any]], *args: Any) -> Response:
    await _call(request, service, *args)
    return Response(status_code=204)


class ColumnTypes(BaseModel):
    """The column types a table may use, and the conversions a column may make between them."""

    types: list[ColumnTypeName]
    conversions: dict[ColumnTypeName, list[ColumnTypeName]]


@router.get("/column-types", response_model=ColumnTypes)
async def column_types() -> ColumnTypes:
    """What the console offers when a column is made or changed, from the server's own lists."""
    return ColumnTypes(types=list(COLUMN_TYPES), conversions=conversion_table())


@router.post("/apps", status_code=201, response_model=AppView)
async def create_app(request: Request, body: Body[NewApp]) -> dict[str, Any]:
    return apps.public_app(await _call(request, apps.create_app, body))


@router.get("/apps", response_model=AppList)
async def list_apps(request: Request) -> dict[str, Any]:
    return {"items": [apps.public_app(a) for a in await _call(request, apps.list_apps)]}


@router.get("/apps/{app}", response_model=AppView)
async def get_app(request: Request, app: str) -> dict[str, Any]:
    return apps.public_app(await _call(request, apps.find_app, app))


@router.patch("/apps/{app}", response_model=AppView)
async def patch_app(request: Request, app: str, body: Body[AppChange]) -> dict[str, Any]:
    return apps.public_app(await _call(request, apps.patch_app, app, body))


@router.delete("/apps/{app}", status_code=204)
async def delete_app(request: Request, app: str) -> Response:
    return await _deleted(request, apps.delete_app, app)


@router.post("/apps/{app}/tables", status_code=201, response_model=None,
             responses=declared(201, TableView))
async def create_table(request: Request, app: str, body: Body[TableDef]) -> dict[str, Any]:
    return (await _call(request, definitions.create_table, app, body)).public()


@router.get("/apps/{app}/tables", response_model=None, responses=declared(200, TableList))
async def list_tables(request: Request, app: str) -> dict[str, Any]:
    return await _listed(request, definitions.list_tables, app)


@router.get("/apps/{app}/tables/{table}", response_model=None,
            responses=declared(200, TableView))
async def get_table(request: Request, app: str, table: str) -> dict[str, Any]:
    return await _call(request, definitions.get_table, app, table)


@router.patch("/apps/{app}/tables/{table}", response_model=None,
              responses=declared(200, TableView))
async def patch_table(request: Request, app: str, table: str,
                      body: Body[TableChange]) -> dict[str, Any]:
    return await _call(request, definitions.patch_table, app, table, body)


@router.delete("/apps/{app}/tables/{table}", status_code=204)
async def delete_table(request: Request, app: str, table: str) -> Response:
    return await _deleted(request, definitions.delete_table, app, table)


@router.put("/apps/{app}/tables/{table}/indexes/{name}", status_code=202, response_model=None,
            responses=declared(202, IndexView))
async def put_index(request: Request, app: str, table: str, name: str,
                    body: Body[IndexSpec]) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        app_uid, view, start = await definitions.put_index(conn, app, table, name, body)
    if start:  # after commit: the build runs outside any transaction
        svc.indexes.start(app_uid, table, name)
    return view


@router.get("/apps/{app}/tables/{table}/indexes", response_model=None,
            responses=declared(200, IndexList))
async def list_indexes(request: Request, app: str, table: str) -> dict[str, Any]:
    return await _listed(request, definitions.list_indexes, app, table)


@router.get("/apps/{app}/tables/{table}/indexes/{name}", response_model=None,
            responses=declared(200, IndexView))
async def get_index(request: Request, app: str, table: str, name: str) -> dict[str, Any]:
    return await _call(request, definitions.get_index, app, table, name)


@router.delete("/apps/{app}/tables/{table}/indexes/{name}", status_code=204)
async def delete_index(request: Request, app: str, table: str, name: str) -> Response:
    svc = services(request)
    async with svc.tx() as conn:
        app_uid, builder = await definitions.delete_index(conn, app, table, name)
    await svc.indexes.drop(app_uid, table, name, builder)
    return Response(status_code=204)


@router.post("/apps/{app}/orgs", status_code=201, response_model=None,
             responses=declared(201, OrgView))
async def create_org(request: Request, app: str, body: Body[NewOrg]) -> dict[str, Any]:
    return await _call(request, tenancy.create_org, app, body)


@router.get("/apps/{app}/orgs", response_model=None,
             responses=declared(200, OrgList))
async def list_orgs(request: Request, app: str) -> dict[str, Any]:
    return await _listed(request, tenancy.list_orgs, app)


@router.delete("/apps/{app}/orgs/{org}", status_code=204)
async def delete_org(request: Request, app: str, org: str) -> Response:
    return await _deleted(request, tenancy.delete_org, app, org)


@router.post("/apps/{app}/users", status_code=201, response_model=None,
             responses=declared(201, UserView))
async def create_user(request: Request, app: str, body: Body[NewUser]) -> dict[str, Any]:
    return await _call(request, tenancy.create_user, app, body)


@router.get("/apps/{app}/users", response_model=None,
             responses=declared(200, UserList))
async def list_users(request: Request, app: str) -> dict[str, Any]:
    return await _listed(request, tenancy.list_users, app)


@router.delete("/apps/{app}/users/{user}", status_code=204)
async def delete_user(request: Request, app: str, user: str) -> Response:
    return await _deleted(request, tenancy.delete_user, app, user)


@router.put("/apps/{app}/orgs/{org}/members/{user}", response_model=None,
             responses=declared(200, MemberSet))
async def put_member(request: Request, app: str, org: str, user: str,
                     body: Body[Membership]) -> dict[str, Any]:
    return await _call(request, tenancy.put_member, app, org, user, body)


@router.get("/apps/{app}/orgs/{org}/members", response_model=None,
             responses=declared(200, MemberPage))
async def list_members(request: Request, app: str, org: str, limit: str | None = None,
                       after: str | None = None) -> dict[str, Any]:
    return await _call(request, tenancy.list_members, app, org, limit, after)


@router.get("/apps/{app}/users/{user}/memberships", response_model=None,
             responses=declared(200, MembershipList))
async def list_memberships(request: Request, app: str, user: str) -> dict[str, Any]:
    return await _listed(request, tenancy.list_memberships, app, user)


@router.delete("/apps/{app}/orgs/{org}/members/{user}", status_code=204)
async def delete_member(request: Request, app: str, org: str, user: str) -> Response:
    return await _deleted(request, tenancy.delete_member, app, org, user)


@router.put("/apps/{app}/roles/{role}", response_model=None,
            responses=declared(200, RoleView))
async def put_role(request: Request, app: str, role: str, body: Body[RoleDef]) -> dict[str, Any]:
    return await _call(request, tenancy.put_role, app, role, body)


@router.get("/apps/{app}/roles", response_model=None, responses=declared(200, RoleList))
async def list_roles(request: Request, app: str) -> dict[str, Any]:
    return await _listed(request, tenancy.list_roles, app)


@router.get("/apps/{app}/roles/{role}", response_model=None,
            responses=declared(200, RoleView))
async def get_role(request: Request, app: str, role: str) -> dict[str, Any]:
    return await _call(request, tenancy.get_role, app, role)


@router.delete("/apps/{app}/roles/{role}", status_code=204)
async def delete_role(request: Request, app: str, role: str) -> Response:
    return await _deleted(request, tenancy.delete_role, app, role)


# An org's API keys (section 3b), the operator's way.


@router.post("/apps/{app}/orgs/{org}/keys", status_code=201, response_model=None,
             responses=declared(201, CreatedKey))
async def create_key(request: Request, app: str, org: str, body: Body[NewKey]) -> dict[str, Any]:
    return await _call(request, keys.operator_creates_key, app, org, body)


@router.get("/apps/{app}/orgs/{org}/keys", response_model=None,
            responses=declared(200, KeyList))
async def list_keys(request: Request, app: str, org: str) -> dict[str, Any]:
    return await _listed(request, keys.KEYS.operator_lists, app, org)


@router.delete("/apps/{app}/orgs/{org}/keys/{key}", status_code=204)
async def delete_key(request: Request, app: str, org: str, key: str) -> Response:
    return await _deleted(request, keys.KEYS.operator_revokes, app, org, key)


# An org's invitations (section 3a), the operator's way: the console sends, resends (the same
# address again) and revokes them.


@router.post("/apps/{app}/orgs/{org}/invitations", status_code=201, response_model=None,
             responses=declared(201, InvitationView))
async def create_invitation(request: Request, app: str, org: str,
                            body: Body[NewInvitation]) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        app_row, org_row, invitation, token = await invitations.operator_invites(
            conn, app, org, body)
        await postbox(request).queue(conn, app_row, "invite", invitation["email"], token,
                                     org=org_row.name)
    mail_committed(svc)
    return invitation


@router.get("/apps/{app}/orgs/{org}/invitations", response_model=None,
            responses=declared(200, InvitationList))
async def list_invitations(request: Request, app: str, org: str) -> dict[str, Any]:
    return await _listed(request, invitations.INVITATIONS.operator_lists, app, org)


@router.delete("/apps/{app}/orgs/{org}/invitations/{invitation}", status_code=204)
async def delete_invitation(request: Request, app: str, org: str, invitation: str) -> Response:
    return await _deleted(request, invitations.INVITATIONS.operator_revokes, app, org, invitation)
