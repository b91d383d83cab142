"""Orgs, users, members and roles. Every change to members or roles bumps the app version."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Table, delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric.auth.passwords import hash_password
from authoric.auth.sessions import revoke_sessions
from authoric.catalog.apps import bump_version, find_app
from authoric.catalog.names import check_name
from authoric.catalog.roles import RoleDef, check_role
from authoric.catalog.snapshot import AppSnapshot, load_snapshot
from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.errors import BadRequest, Conflict, NotFound, ValidationFailed
from authoric.plan.listing import parse_limit
from authoric.query.fields import table_fields
from authoric.query.filters import FilterScope, compile_filter
from authoric.tenancy.acting import parse_uid
from authoric.tenancy.models import Membership, NewOrg, NewUser

# Organizations ---------------------------------------------------------------------------

async def create_org(conn: AsyncConnection, app_ref: str, new: NewOrg, *,
                     name_taken_is_conflict: bool = True) -> dict[str, Any]:
    """A new org of the app. The operator's (`name_taken_is_conflict`) is 409 for a name in
    use: the operator sees every org, and the SDK and CLI find orgs by name. A user's is not:
    a 409 would tell them another tenant's org exists, and let anyone squat names."""
    app = await find_app(conn, app_ref)
    name = new.name
    if name_taken_is_conflict and await conn.scalar(select(t.orgs.c.uid).where(
            t.orgs.c.app_uid == app["uid"], t.orgs.c.name == name).limit(1)) is not None:
        raise Conflict(f"an org named {name!r} exists", {"name": name})
    uid = uuid7()
    await conn.execute(t.orgs.insert().values(uid=uid, app_uid=app["uid"], name=name))
    return {"uid": str(uid), "name": name}


async def list_orgs(conn: AsyncConnection, app_ref: str) -> list[dict[str, Any]]:
    app = await find_app(conn, app_ref)
    rows = await conn.execute(select(t.orgs).where(t.orgs.c.app_uid == app["uid"])
                              .order_by(t.orgs.c.created_at))
    return [{"uid": str(r.uid), "name": r.name} for r in rows]


async def _owned(conn: AsyncConnection, table: Table, kind: str, app_uid: uuid.UUID,
                 ref: str) -> Any:
    """The app's org or user whose uid is `ref`; 404 naming it when the app has none."""
    row = (await conn.execute(select(table).where(
        table.c.app_uid == app_uid, table.c.uid == parse_uid(ref, kind)))).first()
    if row is None:
        raise NotFound(f"no such {kind}", {kind: ref})
    return row


async def _delete_owned(conn: AsyncConnection, table: Table, kind: str, app_ref: str,
                        ref: str) -> Any:
    """Delete the app's org or user `ref` (what hangs off it cascades) and bump the app's
    version, so no cached decision outlives it. The deleted row."""
    app = await find_app(conn, app_ref)
    row = await _owned(conn, table, kind, app["uid"], ref)
    await conn.execute(delete(table).where(table.c.uid == row.uid))
    await bump_version(conn, app["uid"])
    return row


async def _org(conn: AsyncConnection, app_uid: uuid.UUID, ref: str) -> Any:
    return await _owned(conn, t.orgs, "org", app_uid, ref)


async def app_and_org(conn: AsyncConnection, app_ref: str, org_ref: str) -> tuple[Any, Any]:
    """The app `app_ref` and its org `org_ref`; 404 for either unknown."""
    app = await find_app(conn, app_ref)
    return app, await _org(conn, app["uid"], org_ref)


async def delete_org(conn: AsyncConnection, app_ref: str, org_ref: str) -> None:
    await _delete_owned(conn, t.orgs, "org", app_ref, org_ref)


# Users -----------------------------------------------------------------------------------

async def create_user(conn: AsyncConnection, app_ref: str, new: NewUser) -> dict[str, Any]:
    app = await find_app(conn, app_ref)
    # The operator vouches for the address: the user is verified.
    uid = await insert_user(conn, app["uid"], new.email, await hash_password(new.password),
                            verified=True)
    if uid is None:
        raise Conflict("a user with this email exists", {"email": new.email})
    return {"uid": str(uid), "email": new.email}


async def insert_user(conn: AsyncConnection, app_uid: uuid.UUID, email: str,
                      password_hash: str, *, verified: bool) -> uuid.UUID | None:
    """The new user's uid, or None when the app already has one with `email` (even one a
    concurrent request just made: the unique index decides, in a savepoint, so the caller's
    transaction goes on). `verified`: the address is proven (the operator's word, or a
    mailed link)."""
    uid = uuid7()
    try:
        async with conn.begin_nested():
            await conn.execute(t.users.insert().values(
                uid=uid, app_uid=app_uid, email=email, password_hash=password_hash,
                email_verified_at=func.now() if verified else None))
    except IntegrityError:
        return None
    return uid


async def list_users(conn: AsyncConnection, app_ref: str) -> list[dict[str, Any]]:
    app = await find_app(conn, app_ref)
    rows = await conn.execute(select(t.users.c.uid, t.users.c.email, t.users.c.email_verified_at)
                              .where(t.users.c.app_uid == app["uid"])
                              .order_by(t.users.c.created_at))
    return [{"uid": str(r.uid), "email": r.email,
             "emailVerified": r.email_verified_at is not None} for r in rows]


async def _user(conn: AsyncConnection, app_uid: uuid.UUID, ref: str) -> Any:
    return await _owned(conn, t.users, "user", app_uid, ref)


async def find_user(conn: AsyncConnection, app_ref: str, user_ref: str) -> Any:
    """The app's user `user_ref` (a uid), or 404 for an unknown app or user."""
    app = await find_app(conn, app_ref)
    return await _user(conn, app["uid"], user_ref)


async def delete_user(conn: AsyncConnection, app_ref: str, user_ref: str) -> None:
    user = await _delete_owned(conn, t.users, "user", app_ref, user_ref)
    await revoke_sessions(conn, user.uid)


# Members ---------------------------------------------------------------------------------

async def put_member(conn: AsyncConnection, app_ref: str, org_ref: str, user_ref: str,
                     membership: Membership) -> dict[str, Any]:
    app = await find_app(conn, app_ref)
    org = await _org(conn, app["uid"], org_ref)
    user = await _user(conn, app["uid"], user_ref)
    roles = await known_roles(conn, app["uid"], membership.roles)
    return await set_member_roles(conn, app["uid"], org.uid, user.uid, roles)


async def known_roles(conn: AsyncConnection, app_uid: uuid.UUID, roles: list[str]) -> list[str]:
    """`roles` sorted, each once; 422 naming any the app does not define."""
    known = set((await conn.execute(select(t.roles.c.name).where(
        t.roles.c.app_uid == app_uid))).scalars())
    unknown = sorted(set(roles) - known)
    if unknown:
        raise ValidationFailed(f"unknown roles: {', '.join(unknown)}", {"roles": unknown})
    return sorted(set(roles))


async def set_member_roles(conn: AsyncConnection, app_uid: uuid.UUID, org_uid: uuid.UUID,
                           user_uid: uuid.UUID, roles: list[str]) -> dict[str, Any]:
    """Make the user a member of the org with exactly `roles` (known ones), the operator's
    way and a member's alike; the membership as section 2 shows it."""
    stmt = insert(t.members).values(app_uid=app_uid, org_uid=org_uid, user_uid=user_uid,
                                    roles=roles)
    await conn.execute(stmt.on_conflict_do_update(index_elements=["org_uid", "user_uid"],
                                                  set_={"roles": roles}))
    await bump_version(conn, app_uid)
    return {"org": str(org_uid), "user": str(user_uid), "roles": roles}


async def delete_member(conn: AsyncConnection, app_ref: str, org_ref: str, user_ref: str) -> None:
    app = await find_app(conn, app_ref)
    org = await _org(conn, app["uid"], org_ref)
    user = await _user(conn, app["uid"], user_ref)
    if not await remove_member(conn, app["uid"], org.uid, user.uid):
        raise NotFound("no such membership")


async def remove_member(conn: AsyncConnection, app_uid: uuid.UUID, org_uid: uuid.UUID,
                        user_uid: uuid.UUID) -> bool:
    """End the membership (whether there was one): its sessions are revoked, and the app's
    version moves, so its access tokens fail the next statement's guard and its streams are
    closed on every process (the relay's policy NOTIFY)."""
    result = await conn.execute(delete(t.members).where(
        t.members.c.org_uid == org_uid, t.members.c.user_uid == user_uid))
    if not result.rowcount:
        return False
    await revoke_sessions(conn, user_uid, org_uid)
    await bump_version(conn, app_uid)
    return True


MEMBERS_DEFAULT_LIMIT, MEMBERS_MAX_LIMIT = 50, 1000


async def list_members(conn: AsyncConnection, app_ref: str, org_ref: str, limit: str | None,
                       after: str | None) -> dict[str, Any]:
    """A page of the org's members by user uid (section 2's shape)."""
    app = await find_app(conn, app_ref)
    org = await _org(conn, app["uid"], org_ref)
    page = await member_page(conn, org.uid, limit, after)
    return {"items": [{"org": str(org.uid), **m} for m in page["items"]], "next": page["next"]}


async def member_page(conn: AsyncConnection, org_uid: uuid.UUID, limit: str | None,
                      after: str | None) -> dict[str, Any]:
    """A page of the org's members by user uid, each `{"user", "email", "roles",
    "joinedAt"}`; the cursor is the last user uid of the page."""
    size = parse_limit(limit, MEMBERS_DEFAULT_LIMIT, MEMBERS_MAX_LIMIT)
    where = [t.members.c.org_uid == org_uid]
    if after is not None:
        try:
            where.append(t.members.c.user_uid > uuid.UUID(after))
        except ValueError as exc:
            raise BadRequest("bad cursor", {"after": after}) from exc
    rows = (await conn.execute(
        select(t.members.c.user_uid, t.members.c.roles, t.members.c.joined_at, t.users.c.email)
        .join(t.users, t.users.c.uid == t.members.c.user_uid)
        .where(*where).order_by(t.members.c.user_uid).limit(size + 1))).all()
    page = rows[:size]
    return {"items": [{"user": str(r.user_uid), "email": r.email, "roles": list(r.roles),
                       "joinedAt": rfc3339(r.joined_at)} for r in page],
            "next": str(page[-1].user_uid) if len(rows) > size else None}


async def list_memberships(conn: AsyncConnection, app_ref: str,
                           user_ref: str) -> list[dict[str, Any]]:
    """Every org the user belongs to, with its name and the user's roles there."""
    app = await find_app(conn, app_ref)
    user = await _user(conn, app["uid"], user_ref)
    rows = await conn.execute(
        select(t.members.c.org_uid, t.members.c.roles, t.orgs.c.name)
        .join(t.orgs, t.orgs.c.uid == t.members.c.org_uid)
        .where(t.members.c.user_uid == user.uid).order_by(t.orgs.c.name, t.orgs.c.uid))
    return [{"org": str(r.org_uid), "orgName": r.name, "roles": list(r.roles)} for r in rows]


# Roles -----------------------------------------------------------------------------------

async def put_role(conn: AsyncConnection, app_ref: str, name: str, role: RoleDef) -> dict[str, Any]:
    app = await find_app(conn, app_ref)
    check_name(name, "role")
    check_role(role)
    role.grants = sorted(set(role.grants))
    check_against_tables(role, await load_snapshot(conn, app["uid"]))
    values = {"permissions": role.permissions, "row_policies": role.row_policies,
              "redact": role.redact, "grants": sorted(set(role.grants))}
    stmt = insert(t.roles).values(app_uid=app["uid"], name=name, **values)
    await conn.execute(stmt.on_conflict_do_update(index_elements=["app_uid", "name"],
                                                  set_=values))
    await bump_version(conn, app["uid"])
    return role.public(name)


# Stand-in values for `$principal`: a row policy has to compile for any caller, not one in particular.
_ANY_PRINCIPAL = {"uid": uuid.UUID(int=1), "email": "principal@example.invalid",
                  "org": uuid.UUID(int=2)}


def check_against_tables(role: RoleDef, snapshot: AppSnapshot) -> None:
    """Row policies compile against their tables and redaction names their columns, for the
    tables that exist now. (A later table change that breaks a policy makes it fail closed.)"""
    for table_name, policy in role.row_policies.items():
        compiled = snapshot.tables.get(table_name)
        if compiled is None:
            continue
        try:
            compile_filter(policy, FilterScope(table_fields(compiled), _ANY_PRINCIPAL))
        except BadRequest as exc:
            raise ValidationFailed(
                f"the row policy on {table_name!r} does not compile: {exc.message}",
                {**exc.details, "table": table_name, "reason": exc.message}) from exc
    for table_name, columns in role.redact.items():
        compiled = snapshot.tables.get(table_name)
        if compiled is None:
            continue
        unknown = sorted(set(columns) - {c.name for c in compiled.definition.columns})
        if unknown:
            raise ValidationFailed(f"redact names unknown columns of {table_name!r}: "
                                   f"{', '.join(unknown)}", {"table": table_name, "columns": unknown})


async def list_roles(conn: AsyncConnection, app_ref: str) -> list[dict[str, Any]]:
    app = await find_app(conn, app_ref)
    rows = await conn.execute(select(t.roles).where(t.roles.c.app_uid == app["uid"])
                              .order_by(t.roles.c.name))
    return [_role(r).public(r.name) for r in rows]


def _role(row: Any) -> RoleDef:
    return RoleDef(permissions=row.permissions, rowPolicies=row.row_policies, redact=row.redact,
                   grants=row.grants)


async def get_role(conn: AsyncConnection, app_ref: str, name: str) -> dict[str, Any]:
    app = await find_app(conn, app_ref)
    row = (await conn.execute(select(t.roles).where(
        t.roles.c.app_uid == app["uid"], t.roles.c.name == name))).first()
    if row is None:
        raise NotFound("no such role", {"role": name})
    return _role(row).public(name)


async def delete_role(conn: AsyncConnection, app_ref: str, name: str) -> None:
    app = await find_app(conn, app_ref)
    result = await conn.execute(delete(t.roles).where(
        t.roles.c.app_uid == app["uid"], t.roles.c.name == name))
    if not result.rowcount:
        raise NotFound("no such role", {"role": name})
    # Memberships keep naming the role; it simply grants nothing any more.
    await conn.execute(t.members.update().where(t.members.c.app_uid == app["uid"]).values(
        roles=func.array_remove(t.members.c.roles, name)))
    await bump_version(conn, app["uid"])
