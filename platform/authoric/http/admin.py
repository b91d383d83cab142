"""`/admin`: apps, tables, orgs, users, members and roles, for the platform admin token."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from authoric.auth.admin import is_admin_token
from authoric.catalog import apps, definitions
from authoric.catalog.apps import AppChange, AppList, AppView, NewApp
from authoric.catalog.indexes import IndexSpec
from authoric.catalog.model import TableChange, TableDef
from authoric.errors import Unauthenticated
from authoric.http.bodies import ERROR_RESPONSES, TypedRoute, body_of
from authoric.http.context import Services, services
from authoric.policy.roles import RoleDef
from authoric.tenancy import service as tenancy
from authoric.tenancy.models import Membership, NewOrg, NewUser


def require_admin(request: Request) -> Services:
    svc = services(request)
    if not is_admin_token(request.headers.get("authorization"), svc.admin_token):
        raise Unauthenticated("the admin token is required")
    return svc


router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(require_admin)],
                   route_class=TypedRoute, responses=ERROR_RESPONSES)

# Request bodies, parsed after the admin token is checked.
NewAppBody = Annotated[NewApp, Depends(body_of(NewApp))]
AppChangeBody = Annotated[AppChange, Depends(body_of(AppChange))]
NewTableBody = Annotated[TableDef, Depends(body_of(TableDef))]
TableChangeBody = Annotated[TableChange, Depends(body_of(TableChange))]
NewOrgBody = Annotated[NewOrg, Depends(body_of(NewOrg))]
NewUserBody = Annotated[NewUser, Depends(body_of(NewUser))]
MembershipBody = Annotated[Membership, Depends(body_of(Membership))]
RoleBody = Annotated[RoleDef, Depends(body_of(RoleDef))]
IndexBody = Annotated[IndexSpec, Depends(body_of(IndexSpec))]


@router.post("/apps", status_code=201, response_model=AppView)
async def create_app(request: Request, body: NewAppBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return apps.public_app(await apps.create_app(conn, body))


@router.get("/apps", response_model=AppList)
async def list_apps(request: Request) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return {"items": [apps.public_app(a) for a in await apps.list_apps(conn)]}


@router.get("/apps/{app}", response_model=AppView)
async def get_app(request: Request, app: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return apps.public_app(await apps.find_app(conn, app))


@router.patch("/apps/{app}", response_model=AppView)
async def patch_app(request: Request, app: str, body: AppChangeBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return apps.public_app(await apps.patch_app(conn, app, body))


@router.delete("/apps/{app}", status_code=204)
async def delete_app(request: Request, app: str) -> Response:
    async with services(request).tx() as conn:
        await apps.delete_app(conn, app)
    return Response(status_code=204)


@router.post("/apps/{app}/tables", status_code=201)
async def create_table(request: Request, app: str, body: NewTableBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return (await definitions.create_table(conn, app, body)).public()


@router.get("/apps/{app}/tables")
async def list_tables(request: Request, app: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return {"items": await definitions.list_tables(conn, app)}


@router.get("/apps/{app}/tables/{table}")
async def get_table(request: Request, app: str, table: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await definitions.get_table(conn, app, table)


@router.patch("/apps/{app}/tables/{table}")
async def patch_table(request: Request, app: str, table: str,
                      body: TableChangeBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await definitions.patch_table(conn, app, table, body)


@router.delete("/apps/{app}/tables/{table}", status_code=204)
async def delete_table(request: Request, app: str, table: str) -> Response:
    async with services(request).tx() as conn:
        await definitions.delete_table(conn, app, table)
    return Response(status_code=204)


@router.put("/apps/{app}/tables/{table}/indexes/{name}", status_code=202)
async def put_index(request: Request, app: str, table: str, name: str,
                    body: IndexBody) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        app_uid, view, start = await definitions.put_index(conn, app, table, name, body)
    if start:  # after commit: the build runs outside any transaction
        svc.indexes.start(app_uid, table, name)
    return view


@router.get("/apps/{app}/tables/{table}/indexes")
async def list_indexes(request: Request, app: str, table: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return {"items": await definitions.list_indexes(conn, app, table)}


@router.get("/apps/{app}/tables/{table}/indexes/{name}")
async def get_index(request: Request, app: str, table: str, name: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await definitions.get_index(conn, app, table, name)


@router.delete("/apps/{app}/tables/{table}/indexes/{name}", status_code=204)
async def delete_index(request: Request, app: str, table: str, name: str) -> Response:
    svc = services(request)
    async with svc.tx() as conn:
        app_uid, builder = await definitions.delete_index(conn, app, table, name)
    await svc.indexes.drop(app_uid, table, name, builder)
    return Response(status_code=204)


@router.post("/apps/{app}/orgs", status_code=201)
async def create_org(request: Request, app: str, body: NewOrgBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await tenancy.create_org(conn, app, body)


@router.get("/apps/{app}/orgs")
async def list_orgs(request: Request, app: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return {"items": await tenancy.list_orgs(conn, app)}


@router.delete("/apps/{app}/orgs/{org}", status_code=204)
async def delete_org(request: Request, app: str, org: str) -> Response:
    async with services(request).tx() as conn:
        await tenancy.delete_org(conn, app, org)
    return Response(status_code=204)


@router.post("/apps/{app}/users", status_code=201)
async def create_user(request: Request, app: str, body: NewUserBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await tenancy.create_user(conn, app, body)


@router.get("/apps/{app}/users")
async def list_users(request: Request, app: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return {"items": await tenancy.list_users(conn, app)}


@router.delete("/apps/{app}/users/{user}", status_code=204)
async def delete_user(request: Request, app: str, user: str) -> Response:
    async with services(request).tx() as conn:
        await tenancy.delete_user(conn, app, user)
    return Response(status_code=204)


@router.put("/apps/{app}/orgs/{org}/members/{user}")
async def put_member(request: Request, app: str, org: str, user: str,
                     body: MembershipBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await tenancy.put_member(conn, app, org, user, body)


@router.get("/apps/{app}/orgs/{org}/members")
async def list_members(request: Request, app: str, org: str, limit: str | None = None,
                       after: str | None = None) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await tenancy.list_members(conn, app, org, limit, after)


@router.get("/apps/{app}/users/{user}/memberships")
async def list_memberships(request: Request, app: str, user: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return {"items": await tenancy.list_memberships(conn, app, user)}


@router.delete("/apps/{app}/orgs/{org}/members/{user}", status_code=204)
async def delete_member(request: Request, app: str, org: str, user: str) -> Response:
    async with services(request).tx() as conn:
        await tenancy.delete_member(conn, app, org, user)
    return Response(status_code=204)


@router.put("/apps/{app}/roles/{role}")
async def put_role(request: Request, app: str, role: str, body: RoleBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await tenancy.put_role(conn, app, role, body)


@router.get("/apps/{app}/roles")
async def list_roles(request: Request, app: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return {"items": await tenancy.list_roles(conn, app)}


@router.get("/apps/{app}/roles/{role}")
async def get_role(request: Request, app: str, role: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await tenancy.get_role(conn, app, role)


@router.delete("/apps/{app}/roles/{role}", status_code=204)
async def delete_role(request: Request, app: str, role: str) -> Response:
    async with services(request).tx() as conn:
        await tenancy.delete_role(conn, app, role)
    return Response(status_code=204)
