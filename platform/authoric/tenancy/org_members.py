"""An org's members managed by its own members (section 3a): list, change roles, remove,
each judged against the actor's permissions and the grants ceiling inside the write's
transaction (tenancy/acting.py locks what it reads)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.roles import ORG_MEMBERS
from authoric.tenancy.acting import Acting
from authoric.tenancy.service import known_roles, member_page, remove_member, set_member_roles


async def list_members(conn: AsyncConnection, who: Acting, limit: str | None,
                       after: str | None) -> dict[str, Any]:
    who.require(ORG_MEMBERS, "read_list")
    return await member_page(conn, who.org_uid, limit, after)


async def change_roles(conn: AsyncConnection, who: Acting, ref: str,
                       roles: list[str]) -> dict[str, Any]:
    """The member `ref` given exactly `roles`: only a member all of whose roles, old and new,
    lie within the actor's grants, and never the actor."""
    who.require(ORG_MEMBERS, "update")
    uid, current = who.member(ref)
    who.within_grants(target=current, own=uid == who.user_uid)
    wanted = await known_roles(conn, who.app_uid, roles)
    who.within_grants(target=current, requested=wanted)
    return await set_member_roles(conn, who.app_uid, who.org_uid, uid, wanted)


async def remove(conn: AsyncConnection, who: Acting, ref: str) -> dict[str, Any]:
    """The member `ref` removed (their tokens and streams end); what they held, for the log."""
    who.require(ORG_MEMBERS, "delete")
    uid, current = who.member(ref)
    who.within_grants(target=current, own=uid == who.user_uid)
    await remove_member(conn, who.app_uid, who.org_uid, uid)
    return {"user": str(uid), "roles": list(current)}
