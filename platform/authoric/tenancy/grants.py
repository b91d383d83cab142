"""An org's grants of roles: its API keys (tenancy/keys.py) and its invitations
(accounts/org_invitations.py). Both hand roles in the org to whoever holds a secret, so a
member handles both kinds the same way (section 3a):
- issuing one needs the kind's `create` permission, and roles within the member's grants;
- listing them needs `read_list`;
- revoking one needs `delete`, and a grant whose roles lie within the member's grants.
The operator (the admin token) stands above every ceiling, and is judged by none of this.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.errors import NotFound
from authoric.tenancy.acting import Acting, parse_uid
from authoric.tenancy.service import app_and_org

Listing = Callable[[AsyncConnection, uuid.UUID], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True)
class OrgGrants:
    """One kind of an org's grants of roles, kept in `table` (rows with uid, org_uid and
    roles), and what a member may do with them."""

    noun: str  # "key", "invitation": in 404s, and in the audit log's actions and targets
    resource: str  # whose permissions a member needs (catalog.roles ORG_KEYS, ORG_MEMBERS)
    table: Table
    listing: Listing  # the org's grants, as their answers show them
    view: Callable[[Any], dict[str, Any]]  # one row as its answer shows it
    # What revoking one does besides deleting it, in the same transaction (app uid).
    revoked_also: Callable[[AsyncConnection, uuid.UUID], Awaitable[None]] | None = None

    def member_may_issue(self, who: Acting, roles: Iterable[str]) -> None:
        """403 unless `who` may issue one of these with `roles`."""
        who.require(self.resource, "create")
        who.within_grants(requested=roles)

    async def member_lists(self, conn: AsyncConnection, who: Acting) -> list[dict[str, Any]]:
        who.require(self.resource, "read_list")
        return await self.listing(conn, who.org_uid)

    async def member_revokes(self, conn: AsyncConnection, who: Acting,
                             ref: str) -> dict[str, Any]:
        who.require(self.resource, "delete")
        return await self.revoke(conn, who.app_uid, who.org_uid, ref, who)

    async def operator_lists(self, conn: AsyncConnection, app_ref: str,
                             org_ref: str) -> list[dict[str, Any]]:
        _, org = await app_and_org(conn, app_ref, org_ref)
        return await self.listing(conn, org.uid)

    async def operator_revokes(self, conn: AsyncConnection, app_ref: str, org_ref: str,
                               ref: str) -> None:
        app, org = await app_and_org(conn, app_ref, org_ref)
        await self.revoke(conn, app["uid"], org.uid, ref)

    async def revoke(self, conn: AsyncConnection, app_uid: uuid.UUID, org_uid: uuid.UUID,
                     ref: str, who: Acting | None = None) -> dict[str, Any]:
        """Delete the org's grant `ref` (404 for any other); a member `who` may revoke only
        one whose roles lie within their grants. The grant as it was, for the log."""
        g = self.table
        uid = parse_uid(ref, self.noun)
        row = (await conn.execute(select(g).where(g.c.uid == uid, g.c.org_uid == org_uid)
                                  .with_for_update())).first()
        if row is None:
            raise NotFound(f"no such {self.noun}", {self.noun: ref})
        if who is not None:
            who.within_grants(target=row.roles)
        await conn.execute(delete(g).where(g.c.uid == uid))
        if self.revoked_also is not None:
            await self.revoked_also(conn, app_uid)
        return self.view(row)
