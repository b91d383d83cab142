"""The admin audit log: what an operator changed in an app, when, and on what.

Entries are written by the console services in the transaction of the change they describe
(row writes, impersonations) and by the admin edge (`http.admin_audit`) for the section 2
routes. `details` never holds a password, a token or a row's values: `sanitized` drops any
key that names a secret, whatever the caller passed.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.errors import BadRequest
from authoric.plan.listing import newest_first, parse_id_cursor, parse_limit

DEFAULT_LIMIT, MAX_LIMIT = 50, 1000
# A key whose name ends so holds a secret (or a hash of one): `password`, `refresh_token`,
# `passwordHash`... (`accessTokenTtl` is a number of seconds, and stays).
SECRET_ENDINGS = ("password", "token", "secret", "hash", "authorization", "apikey")


def is_secret_key(key: Any) -> bool:
    name = str(key).lower().replace("_", "").replace("-", "")
    return name == "key" or name.endswith(SECRET_ENDINGS)  # `key`: a new API key (section 3b)


def sanitized(value: Any) -> Any:
    """`value` with every key naming a secret removed, at any depth."""
    if isinstance(value, dict):
        return {k: sanitized(v) for k, v in value.items() if not is_secret_key(k)}
    if isinstance(value, list):
        return [sanitized(v) for v in value]
    return value


class OperatorActor(BaseModel):
    """The operator, with the platform admin token (every entry older than actors, too)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["operator"]


class MemberActor(BaseModel):
    """A member acting on their own org (section 3a): the user's and the org's uids."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["member"]
    user: str
    org: str


class KeyActor(BaseModel):
    """An API key of an org (section 3b): the key's and the org's uids."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["key"]
    key: str
    org: str


AuditActor = Annotated[OperatorActor | MemberActor | KeyActor, Field(discriminator="kind")]


class AuditEntry(BaseModel):
    """One change: when, what (`action`), on what (`target`, a path under the app), who made
    it, and a summary with every secret removed (`details`)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    at: str
    action: str
    target: str
    details: dict[str, Any]
    actor: AuditActor


class AuditPage(BaseModel):
    """A page of the log, newest first, and the cursor of the next (null: the last)."""

    model_config = ConfigDict(extra="forbid")

    items: list[AuditEntry]
    next: str | None


async def record(conn: AsyncConnection, app_uid: uuid.UUID, action: str, target: str,
                 details: dict[str, Any] | None = None,
                 actor: dict[str, Any] | None = None) -> None:
    """Append one entry; it commits or rolls back with the caller's transaction. `actor`:
    who did it (tenancy/acting.py), the operator when not said."""
    await conn.execute(t.audit_log.insert().values(
        app_uid=app_uid, action=action, target=target, details=sanitized(details or {}),
        actor=actor or {"kind": "operator"}))


ACTOR_KINDS = ("operator", "member", "key")


async def list_entries(conn: AsyncConnection, app_uid: uuid.UUID, limit: str | None,
                       after: str | None, actor: str | None = None) -> dict[str, Any]:
    """A page of the app's entries, newest first, and the cursor of the next page; `actor`:
    only the entries of that kind of actor (`operator`, `member` or `key`)."""
    size, before = parse_limit(limit, DEFAULT_LIMIT, MAX_LIMIT), parse_id_cursor(after)
    log = t.audit_log
    where = [log.c.app_uid == app_uid]
    if actor is not None:
        if actor not in ACTOR_KINDS:
            raise BadRequest("actor is operator, member or key", {"actor": actor[:100]})
        where.append(log.c.actor["kind"].astext == actor)
    return await newest_first(conn, log, where, size, before, _entry)


def _entry(row: Any) -> dict[str, Any]:
    return {"id": str(row["id"]), "at": rfc3339(row["at"]), "action": row["action"],
            "target": row["target"], "details": row["details"], "actor": row["actor"]}
