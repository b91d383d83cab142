"""An app as one consistent, cached view: tables compiled, roles parsed, enforcer built.

Snapshots are keyed by the app's `version`, which every change to roles, members or tables
bumps in the same transaction. Each request reads the current version (together with the
principal's roles, in one query), so a change made through any server process is in force
for the very next request on every process, without cross-process cache messages.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import casbin
from sqlalchemy import MetaData, select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.model import TableDef
from authoric.catalog.roles import RoleDef
from authoric.catalog.schema import CompiledTable, compile_table
from authoric.db import tables as t
from authoric.errors import NotFound


@dataclass
class AppSnapshot:
    uid: uuid.UUID
    name: str
    version: int
    settings: dict[str, Any]
    tables: dict[str, CompiledTable]
    roles: dict[str, RoleDef]
    enforcer: casbin.Enforcer
    draft: bool = False  # a copy with a drafted role (a policy preview), never a saved version
    # Owner-defined indexes by table, as defined (their build state is not part of a version).
    indexes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Authorization decisions derived from this version (policy.decision); dropped with it.
    # Not an init field: a copy made with other roles (a policy preview) starts empty.
    decisions: dict[Any, Any] = field(default_factory=dict, init=False, repr=False,
                                      compare=False)

    def table(self, name: str) -> CompiledTable:
        compiled = self.tables.get(name)
        if compiled is None:
            raise NotFound(f"no table {name!r} in this app", {"table": name})
        return compiled


class SnapshotCache:
    """Latest snapshot per app, rebuilt when the app's version moves."""

    def __init__(self) -> None:
        self._by_app: dict[uuid.UUID, AppSnapshot] = {}

    async def get(self, conn: AsyncConnection, app_uid: uuid.UUID, version: int) -> AppSnapshot:
        cached = self._by_app.get(app_uid)
        if cached is not None and cached.version == version:
            return cached
        snapshot = await load_snapshot(conn, app_uid)
        # Loads of one version may race (each awaits the database); the first stored stays,
        # so everyone shares one snapshot, its tables and its decision cache.
        stored = self._by_app.get(app_uid)
        if stored is not None and stored.version == snapshot.version:
            return stored
        self._by_app[app_uid] = snapshot
        return snapshot

    def cached(self, app_uid: uuid.UUID) -> AppSnapshot | None:
        """The latest snapshot held for the app, whatever its version (no database access)."""
        return self._by_app.get(app_uid)

    def forget(self, app_uid: uuid.UUID) -> None:
        self._by_app.pop(app_uid, None)


async def load_snapshot(conn: AsyncConnection, app_uid: uuid.UUID) -> AppSnapshot:
    app = (await conn.execute(select(t.apps).where(t.apps.c.uid == app_uid))).mappings().first()
    if app is None:
        raise NotFound("no such app")
    definitions = (await conn.execute(
        select(t.app_tables.c.definition).where(t.app_tables.c.app_uid == app_uid)
    )).scalars().all()
    role_rows = (await conn.execute(
        select(t.roles).where(t.roles.c.app_uid == app_uid)
    )).mappings().all()
    metadata = MetaData()
    tables = {}
    for doc in definitions:
        definition = TableDef.model_validate(doc)
        tables[definition.name] = compile_table(app_uid, definition, metadata)
    roles = {
        r["name"]: RoleDef(permissions=r["permissions"], rowPolicies=r["row_policies"],
                           redact=r["redact"], grants=r["grants"])
        for r in role_rows
    }
    indexes: dict[str, list[dict[str, Any]]] = {}
    for row in (await conn.execute(select(t.table_indexes).where(
            t.table_indexes.c.app_uid == app_uid).order_by(t.table_indexes.c.name))).mappings():
        indexes.setdefault(row["table_name"], []).append({"name": row["name"], **row["spec"]})
    return AppSnapshot(app["uid"], app["name"], app["version"], dict(app["settings"]), tables,
                       roles, build_enforcer(roles), indexes=indexes)


def searched_columns(rows: list[dict[str, Any]]) -> set[str]:
    """The columns some search index holds, from a table's `AppSnapshot.indexes` rows: a
    list's `search` filter may use the index, and a type change must not break its
    expression."""
    return {c for r in rows if r["kind"] == "search" for c in r["columns"]}
