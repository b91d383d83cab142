"""The change log's writes: recording changes in the writer's own transaction (so a rollback
announces nothing), and keeping the old images of deleted rows readable when their table's
columns are renamed or retyped; and what an entry's `op` may be. (The single-row writes
record theirs inside the write's own statement, a CTE the plan builds from
`db.tables.changes`; positions are the sequencer's.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.db import tables as t
from authoric.db.sql import Sql, statement

# What a change-log entry records (its `op`): one row inserted, updated or deleted, many rows
# of one org changed at once (`bulk`), or a table's columns changed (`schema`, one entry per
# org: its streams get `resync` `schema_change`).
INSERT, UPDATE, DELETE, BULK = "insert", "update", "delete", "bulk"
SCHEMA = "schema"
# On for the platform's own connections (db/engine.py): they file their changes themselves, so
# the SQL capture trigger (changes/capture.py) returns at once for them.
PLATFORM_WRITE = "authoric.platform_write"


async def record_change(conn: AsyncConnection, *, app_uid: uuid.UUID, table: str, op: str,
                        org_uid: uuid.UUID, row_uid: uuid.UUID | None,
                        actor_uid: uuid.UUID | None, old_row: dict[str, Any] | None = None) -> None:
    """Append one change; its position is stamped after commit by the sequencer."""
    await conn.execute(t.changes.insert().values(
        app_uid=app_uid, table_name=table, op=op, row_uid=row_uid, org_uid=org_uid,
        actor_uid=actor_uid, old_row=old_row))


async def record_staged_inserts(conn: AsyncConnection, *, app_uid: uuid.UUID, table: str,
                                org_uid: uuid.UUID, actor_uid: uuid.UUID | None,
                                stage: str, order: str) -> None:
    """One insert entry per row of the staging table `stage` (its `uid` column), in `order`:
    the rows an import has just copied in. `stage` and `order` are the importer's own
    identifiers, never a client's."""
    await conn.execute(statement(
        "INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid, actor_uid) "
        "SELECT :app, :table, :op, uid, :org, :actor FROM {stage} ORDER BY {order}",
        stage=stage, order=order),
        {"app": app_uid, "table": table, "op": INSERT, "org": org_uid, "actor": actor_uid})


async def rename_in_old_images(conn: AsyncConnection, app_uid: uuid.UUID, table: str,
                               renames: Mapping[str, str]) -> None:
    """Old images of deletes are read back as rows of the table: their keys follow a rename."""
    pairs = list(renames.items())
    moved = "old_row"
    for i, _ in enumerate(pairs):
        moved = f"({moved} - :o{i})"
    additions = " || ".join(f"jsonb_build_object(CAST(:n{i} AS text), old_row -> CAST(:o{i} AS text))"
                            for i in range(len(pairs)))
    params: dict[str, Any] = {"app": app_uid, "table": table, "olds": [o for o, _ in pairs]}
    for i, (old, new) in enumerate(pairs):
        params[f"o{i}"], params[f"n{i}"] = old, new
    await conn.execute(statement(
        "UPDATE authoric.changes SET old_row = {moved} || {additions} "
        "WHERE app_uid = :app AND table_name = :table AND old_row ?| CAST(:olds AS text[])",
        moved=Sql(moved), additions=Sql(additions)), params)


# Fixed statements, run as written (`exec_driver_sql`), their parameters numbered.
# The old images of table $2 of app $1 that hold column $3, and its value there as text.
OLD_VALUES = (
    "SELECT id, old_row ->> CAST($3 AS text) AS v FROM authoric.changes "
    "WHERE app_uid = $1 AND table_name = $2 AND old_row ->> CAST($3 AS text) IS NOT NULL")
# Column $1 of the old images $2 (ids) set to the values $3 (JSON texts), pairwise.
CONVERTED_VALUES = (
    "UPDATE authoric.changes c SET old_row = jsonb_set(c.old_row, ARRAY[CAST($1 AS text)], "
    "v.value) FROM unnest(CAST($2 AS bigint[]), CAST($3 AS jsonb[])) AS v(id, value) "
    "WHERE c.id = v.id")


async def convert_old_images(conn: AsyncConnection, app_uid: uuid.UUID, table: str,
                             column: str, convert: Callable[[str], Any]) -> None:
    """Old images hold `column` as its old type rendered it; `convert` gives each stored
    value (as `->>` reads it) as the new type renders it. One read and one UPDATE, however
    many images."""
    images = (await conn.exec_driver_sql(OLD_VALUES, (app_uid, table, column))).all()
    if not images:
        return
    await conn.exec_driver_sql(CONVERTED_VALUES, (
        column, [image.id for image in images],
        [json.dumps(convert(image.v)) for image in images]))
