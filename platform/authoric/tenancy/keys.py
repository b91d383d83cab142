"""An org's API keys (section 3b): created by the operator or by a member with
`org.keys:create` (roles within their grants), listed without the key, and revoked.

The key is shown once, in the creation's answer; only its SHA-256 is kept (auth/api_keys.py).
Revoking deletes the row and moves the app's version: the next request with the key fails
its statement's guard on every replica, and the relay's policy NOTIFY has every process's
streams of the key sent `reauth` `revoked`.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric import clock
from authoric.auth.api_keys import key_hash, new_key
from authoric.catalog.apps import bump_version
from authoric.catalog.roles import ORG_KEYS
from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.errors import ValidationFailed
from authoric.tenancy.acting import OPERATOR_ACTOR, Acting
from authoric.tenancy.grants import OrgGrants
from authoric.tenancy.models import NOT_BLANK
from authoric.tenancy.service import app_and_org, known_roles


class NewKey(BaseModel):
    """`POST .../keys`: a name, the roles the key acts with, and when it stops working."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=NOT_BLANK, max_length=200)
    roles: list[str] = Field(max_length=100)
    expires_at: AwareDatetime | None = Field(default=None, alias="expiresAt")


class KeyView(BaseModel):
    """An API key as listed: never the key itself (RFC 3339 times; null: never)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    uid: str
    name: str
    org: str
    roles: list[str]
    created_at: str = Field(alias="createdAt")
    expires_at: str | None = Field(alias="expiresAt")
    last_used_at: str | None = Field(alias="lastUsedAt")


class CreatedKey(KeyView):
    """A new API key: `key` is shown this once."""

    key: str


class KeyList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[KeyView]


def _view(row: Any) -> dict[str, Any]:
    return {"uid": str(row.uid), "name": row.name, "org": str(row.org_uid),
            "roles": list(row.roles), "createdAt": rfc3339(row.created_at),
            "expiresAt": rfc3339(row.expires_at) if row.expires_at else None,
            "lastUsedAt": rfc3339(row.last_used_at) if row.last_used_at else None}


async def create_key(conn: AsyncConnection, app_uid: uuid.UUID, org_uid: uuid.UUID,
                     new: NewKey, created_by: dict[str, Any]) -> dict[str, Any]:
    """A new key of the org with `new.roles` (known ones); its answer holds the key."""
    roles = await known_roles(conn, app_uid, new.roles)
    if new.expires_at is not None and new.expires_at.timestamp() <= clock.now():
        raise ValidationFailed("expiresAt is in the past", {"expiresAt": new.expires_at.isoformat()})
    key = new_key()
    row = (await conn.execute(t.api_keys.insert().values(
        uid=uuid7(), app_uid=app_uid, org_uid=org_uid, name=new.name.strip(), roles=roles,
        key_hash=key_hash(key), expires_at=new.expires_at, created_by=created_by,
    ).returning(*t.api_keys.c))).one()
    return {**_view(row), "key": key}


async def list_keys(conn: AsyncConnection, org_uid: uuid.UUID) -> list[dict[str, Any]]:
    k = t.api_keys
    rows = await conn.execute(select(k).where(k.c.org_uid == org_uid).order_by(k.c.uid))
    return [_view(r) for r in rows]


# A member lists and revokes keys as any grant of roles in the org (tenancy/grants.py); a
# revoked key moves the app's version, so its next request fails its guard everywhere.
KEYS = OrgGrants("key", ORG_KEYS, t.api_keys, list_keys, _view, bump_version)


async def member_creates_key(conn: AsyncConnection, who: Acting, new: NewKey) -> dict[str, Any]:
    KEYS.member_may_issue(who, new.roles)
    return await create_key(conn, who.app_uid, who.org_uid, new, who.actor)


async def operator_creates_key(conn: AsyncConnection, app_ref: str, org_ref: str,
                               new: NewKey) -> dict[str, Any]:
    app, org = await app_and_org(conn, app_ref, org_ref)
    return await create_key(conn, app["uid"], org.uid, new, OPERATOR_ACTOR)
