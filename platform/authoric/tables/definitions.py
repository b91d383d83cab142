"""Table definitions: create, change and drop user tables (definition row + DDL, one
transaction); and the definition as the admin routes answer it (`TableView`)."""

from __future__ import annotations

import uuid
from typing import Any

from alembic.migration import MigrationContext
from alembic.operations import Operations
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import MetaData, delete, literal, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.apps import bump_version, find_app
from authoric.catalog.model import ColumnDef, ColumnTypeName, TableChange, TableDef, check_columns
from authoric.catalog.model import Operations as TableOperations
from authoric.catalog.names import check_name
from authoric.catalog.schema import compile_table, physical_column, schema_name
from authoric.catalog.snapshot import load_snapshot, searched_columns
from authoric.catalog.types import column_type
from authoric.changes.capture import set_capture, sql_name
from authoric.db import tables as t
from authoric.db.changelog import SCHEMA
from authoric.db.sql import statement
from authoric.errors import Conflict, NotFound, ValidationFailed
from authoric.tables import indexes, schema_change
from authoric.tables.indexes import IndexView
from authoric.tenancy.service import check_against_tables

# How long a schema change waits for a lock before it gives up (503): the requests that
# queue behind a waiting ALTER wait at most this long too.
SCHEMA_LOCK_TIMEOUT_MS = 3000
LOCK_TIMEOUT = "SELECT set_config('lock_timeout', $1, true)"  # for this transaction; run as written


class ColumnView(BaseModel):
    """A column as the definition answers it: every attribute, `options` only for a `select`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    type: ColumnTypeName
    required: bool
    unique: bool
    default: Any
    references: str | None
    options: list[str] = Field(default_factory=list)  # absent unless the column has options


class OperationsView(TableOperations):
    """The table's operation switches, each on or off."""

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)


class TableView(BaseModel):
    """A table's definition as the admin routes answer it: the contract's defaults filled in,
    the display column resolved, and `indexes` once the table has any."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    columns: list[ColumnView]
    operations: OperationsView
    soft_delete: bool = Field(alias="softDelete")
    capture_sql_writes: bool = Field(alias="captureSqlWrites")
    sql_name: str = Field(alias="sqlName")
    display_column: str | None = Field(alias="displayColumn")
    indexes: list[IndexView] = Field(default_factory=list)  # absent while none


class TableList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[TableView]


async def list_tables(conn: AsyncConnection, app_ref: str) -> list[dict[str, Any]]:
    app = await find_app(conn, app_ref)
    docs = (await conn.execute(select(t.app_tables.c.definition)
                               .where(t.app_tables.c.app_uid == app["uid"])
                               .order_by(t.app_tables.c.created_at))).scalars()
    by_table = await indexes.indexes_by_table(conn, app["uid"])
    return [_with_indexes(TableDef.model_validate(doc).public(), by_table.get(doc["name"], []))
            for doc in docs]


def _with_indexes(public: dict[str, Any], listed: list[dict[str, Any]]) -> dict[str, Any]:
    """The definition as answered: `indexes` once the table has any."""
    return {**public, "indexes": listed} if listed else public


async def table_view(conn: AsyncConnection, app_uid: uuid.UUID,
                     definition: TableDef) -> dict[str, Any]:
    """The definition as the admin routes answer it, its indexes with their state included."""
    listed = (await indexes.indexes_by_table(conn, app_uid)).get(definition.name, [])
    return _with_indexes(definition.public(), listed)


async def get_table(conn: AsyncConnection, app_ref: str, name: str) -> dict[str, Any]:
    app = await find_app(conn, app_ref)
    return await table_view(conn, app["uid"], await _definition(conn, app["uid"], name))


# Indexes (tables.indexes builds them; these resolve the app and table of the URL) -----------

async def put_index(conn: AsyncConnection, app_ref: str, table: str, name: str,
                    spec: indexes.IndexSpec) -> tuple[uuid.UUID, dict[str, Any], bool]:
    """(app uid, the index as recorded, whether its build must start after commit)."""
    app = await find_app(conn, app_ref)
    definition = await _definition(conn, app["uid"], table)
    view, start = await indexes.put_index(conn, app["uid"], definition, name, spec)
    if start:  # the per-app OpenAPI document lists the app's indexes
        await bump_version(conn, app["uid"])
    return app["uid"], view, start


async def list_indexes(conn: AsyncConnection, app_ref: str, table: str) -> list[dict[str, Any]]:
    app = await find_app(conn, app_ref)
    await _definition(conn, app["uid"], table)
    return await indexes.list_indexes(conn, app["uid"], table)


async def get_index(conn: AsyncConnection, app_ref: str, table: str,
                    name: str) -> dict[str, Any]:
    app = await find_app(conn, app_ref)
    await _definition(conn, app["uid"], table)
    return await indexes.get_index(conn, app["uid"], table, name)


async def delete_index(conn: AsyncConnection, app_ref: str, table: str,
                       name: str) -> tuple[uuid.UUID, int | None]:
    """Forget the index; (app uid, the pid of a build to cancel) for the drop after commit."""
    app = await find_app(conn, app_ref)
    await _definition(conn, app["uid"], table)
    builder = await indexes.forget_index(conn, app["uid"], table, name)
    await bump_version(conn, app["uid"])
    return app["uid"], builder


async def _definition(conn: AsyncConnection, app_uid: uuid.UUID, name: str) -> TableDef:
    doc = (await conn.execute(select(t.app_tables.c.definition).where(
        t.app_tables.c.app_uid == app_uid, t.app_tables.c.name == name))).scalar()
    if doc is None:
        raise NotFound(f"no table {name!r}", {"table": name})
    return TableDef.model_validate(doc)


async def create_table(conn: AsyncConnection, app_ref: str, definition: TableDef) -> TableDef:
    check_name(definition.name, "table")
    check_columns(definition.columns, set())
    app = await find_app(conn, app_ref)
    snapshot = await load_snapshot(conn, app["uid"])
    if definition.name in snapshot.tables:
        raise Conflict(f"table {definition.name!r} exists", {"table": definition.name})
    _check_references(definition.columns, set(snapshot.tables) | {definition.name})
    metadata = MetaData()
    for other in snapshot.tables.values():
        compile_table(app["uid"], other.definition, metadata)
    compiled = compile_table(app["uid"], definition, metadata)
    await conn.run_sync(lambda sync: compiled.table.create(sync))
    definition.sql_name = sql_name(app["uid"], definition.name)
    if definition.capture_sql_writes:
        await set_capture(conn, app["uid"], definition.name, definition.soft_delete, True)
    await conn.execute(t.app_tables.insert().values(
        app_uid=app["uid"], name=definition.name, definition=definition.stored()))
    await bump_version(conn, app["uid"])
    return definition


def _check_references(columns: list[ColumnDef], tables: set[str]) -> None:
    for column in columns:
        if column_type(column.type).is_reference and column.references not in tables:
            raise ValidationFailed(
                f"column {column.name!r} references unknown table {column.references!r}",
                {"column": column.name, "references": column.references})


async def patch_table(conn: AsyncConnection, app_ref: str, name: str,
                      change: TableChange) -> dict[str, Any]:
    """Apply one PATCH in the caller's transaction: all of it, or (raising) none of it."""
    app = await find_app(conn, app_ref)
    app_uid = app["uid"]
    definition = await _definition(conn, app_uid, name)
    # A change waiting behind a long query fails (503, retry) instead of queueing every
    # request of the table behind its lock.
    await conn.exec_driver_sql(LOCK_TIMEOUT, (f"{SCHEMA_LOCK_TIMEOUT_MS}ms",))
    if change.operations is not None:
        definition.operations = change.operations.applied_to(definition.operations)
    added, dropped = change.add_columns, change.drop_columns
    snapshot = await load_snapshot(conn, app_uid)
    for column_name in dropped:
        if definition.column(column_name) is None:
            raise ValidationFailed(f"no column {column_name!r}", {"column": column_name})
    if dropped:
        await schema_change.drop_from_roles(conn, app_uid, definition, dropped)
    definition.columns = [c for c in definition.columns if c.name not in dropped]
    if definition.display_column in dropped:
        definition.display_column = None
    if change.rename_columns:
        schema_change.check_renames(definition, change.rename_columns)
    check_columns(added, _taken_names(definition, change.rename_columns))
    _check_references(added, set(snapshot.tables))
    await _alter(conn, app_uid, snapshot, definition, [], dropped)
    await indexes.forget_dropped(conn, app_uid, name, set(dropped))
    if change.rename_columns:
        await schema_change.rename_columns(conn, app_uid, definition, change.rename_columns)
        await indexes.follow_renames(conn, app_uid, name, change.rename_columns)
    definition.columns += added
    await _alter(conn, app_uid, snapshot, definition, added, [])
    if change.alter_columns:
        await _alter_columns(conn, app_uid, definition, change)
    if "display_column" in change.model_fields_set:
        definition.display_column = change.display_column
    if definition.display_column is not None and definition.column(
            definition.display_column) is None:
        raise ValidationFailed(f"no column {definition.display_column!r} to display",
                               {"column": definition.display_column})
    if change.capture_sql_writes is not None:
        definition.capture_sql_writes = change.capture_sql_writes
        await set_capture(conn, app_uid, name, definition.soft_delete,
                          change.capture_sql_writes)
    definition.sql_name = sql_name(app_uid, name)
    await conn.execute(update(t.app_tables).where(
        t.app_tables.c.app_uid == app_uid, t.app_tables.c.name == name,
    ).values(definition=definition.stored()))
    await _check_roles(conn, app_uid)
    if change.changes_columns:
        await record_schema_change(conn, app_uid, name)
    await bump_version(conn, app_uid)
    return await table_view(conn, app_uid, definition)


def _taken_names(definition: TableDef, renames: dict[str, str]) -> set[str]:
    """Column names (and references' `_uid` names) in use once the renames are done."""
    names = {renames.get(c.name, c.name) for c in definition.columns}
    return names | {f"{renames.get(c.name, c.name)}_uid" for c in definition.columns
                    if column_type(c.type).is_reference}


async def _alter_columns(conn: AsyncConnection, app_uid: uuid.UUID, definition: TableDef,
                         change: TableChange) -> None:
    """Check every alteration against the rows (writes wait meanwhile), then apply them."""
    names = [a.name for a in change.alter_columns]
    if len(set(names)) != len(names):
        raise ValidationFailed("a column is altered twice", {"columns": names})
    searched = searched_columns(
        await indexes.list_indexes(conn, app_uid, definition.name))
    pairs = [(definition.column(a.name), schema_change.altered(definition, a, searched))
             for a in change.alter_columns]
    # Rows written between the check and the change could escape the check: writes wait
    # (reads go on) until this transaction ends; a type change locks the table anyway.
    await conn.execute(statement("LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE",
                                 table=(schema_name(app_uid), definition.name)))
    failing: list[dict[str, Any]] = []
    for before, after in pairs:
        assert before is not None
        refused = await schema_change.failing_rows(conn, app_uid, definition, before, after)
        failing += await schema_change.with_values(conn, app_uid, definition, before, refused)
    if failing:
        raise ValidationFailed("some rows cannot take this change; nothing was changed",
                               {"rows": failing[:indexes.MAX_LISTED_ROWS]})
    for before, after in pairs:
        assert before is not None
        definition.columns = [after if c.name == after.name else c for c in definition.columns]
        await schema_change.alter_column(conn, app_uid, definition, before, after)


async def _check_roles(conn: AsyncConnection, app_uid: uuid.UUID) -> None:
    """Every role's row policies still compile against the tables as changed (a type change
    can leave a policy comparing a column with a value of its old type): 422 else."""
    snapshot = await load_snapshot(conn, app_uid)
    for role in snapshot.roles.values():
        check_against_tables(role, snapshot)


async def record_schema_change(conn: AsyncConnection, app_uid: uuid.UUID, table: str) -> None:
    """One change-log entry per org of the app: their streams of the table get `resync`
    `schema_change`, in log order, on every replica, like a bulk change's."""
    await conn.execute(t.changes.insert().from_select(
        ["app_uid", "table_name", "op", "org_uid"],
        select(t.orgs.c.app_uid, literal(table), literal(SCHEMA), t.orgs.c.uid)
        .where(t.orgs.c.app_uid == app_uid)))


async def _alter(conn: AsyncConnection, app_uid: uuid.UUID, snapshot: Any, definition: TableDef,
                 added: list[ColumnDef], dropped: list[str]) -> None:
    schema = schema_name(app_uid)
    metadata = MetaData()
    for other in snapshot.tables.values():
        if other.name != definition.name:
            compile_table(app_uid, other.definition, metadata)
    compiled = compile_table(app_uid, definition, metadata)

    def run(sync: Connection) -> None:
        ops = Operations(MigrationContext.configure(sync))
        for column_name in dropped:
            ops.drop_column(definition.name, column_name, schema=schema)
        for column in added:
            ops.add_column(definition.name, physical_column(column), schema=schema)
        for constraint in list(compiled.table.constraints):
            columns = {c.name for c in getattr(constraint, "columns", [])}
            if columns & {c.name for c in added} and constraint.name:
                ops.invoke(_add_constraint_op(constraint))
        for index in compiled.table.indexes:
            if {c.name for c in index.columns} & {c.name for c in added}:
                index.create(sync)

    try:
        async with conn.begin_nested():
            await conn.run_sync(run)
    except DBAPIError as exc:
        raise Conflict("the table's rows do not allow this change",
                       {"reason": str(exc.orig).splitlines()[-1]}) from exc


def _add_constraint_op(constraint: Any) -> Any:
    from alembic.operations import ops

    return ops.AddConstraintOp.from_constraint(constraint)


async def delete_table(conn: AsyncConnection, app_ref: str, name: str) -> None:
    app = await find_app(conn, app_ref)
    snapshot = await load_snapshot(conn, app["uid"])
    compiled = snapshot.table(name)
    dependents = [
        other.name for other in snapshot.tables.values() if other.name != name
        and any(c.references == name for c in other.definition.columns)
    ]
    if dependents:
        raise Conflict(f"table {name!r} is referenced by {', '.join(dependents)}",
                       {"referencedBy": dependents})
    await conn.run_sync(lambda sync: compiled.table.drop(sync))
    await conn.execute(delete(t.app_tables).where(
        t.app_tables.c.app_uid == app["uid"], t.app_tables.c.name == name))
    await bump_version(conn, app["uid"])
