"""Orgs created by their users (contract 3a, `orgCreation: "users"`): the creator becomes a
member with the app's `orgOwnerRoles`, and gets a token pair for the new org."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric.accounts.caller import AccountCaller
from authoric.accounts.models import NewMemberOrg
from authoric.auth.sessions import issue
from authoric.catalog.apps import app_settings, bump_version
from authoric.console import audit
from authoric.db import tables as t
from authoric.errors import Forbidden
from authoric.tenancy.acting import member_actor
from authoric.tenancy.models import NewOrg
from authoric.tenancy.service import create_org


async def create_member_org(conn: AsyncConnection, secret: str, caller: AccountCaller,
                            body: NewMemberOrg, user_agent: str | None) -> dict[str, Any]:
    """201's answer: the org and a token pair for it; 403 `org_creation_closed` unless the
    app lets users create orgs. A name another org has is fine: nothing tells the user of
    other tenants' orgs."""
    app = caller.app
    settings = app_settings(app["settings"])
    if settings.org_creation != "users":
        raise Forbidden("only the operator creates orgs in this app",
                        {"reason": "org_creation_closed"})
    org = await create_org(conn, str(app["uid"]), NewOrg(name=body.name),
                           name_taken_is_conflict=False)
    org_uid, membership = uuid.UUID(org["uid"]), uuid7()
    await conn.execute(t.members.insert().values(
        app_uid=app["uid"], org_uid=org_uid, user_uid=caller.user.uid,
        roles=settings.org_owner_roles, uid=membership))
    await bump_version(conn, app["uid"])
    await audit.record(conn, app["uid"], "org.create", f"orgs/{org['uid']}", {
        "name": org["name"], "roles": settings.org_owner_roles},
        member_actor(caller.user.uid, org_uid))
    pair = await issue(conn, secret, app, caller.user.uid, org_uid, membership, uuid7(),
                       user_agent)
    return {"org": org, **pair}
