"""Schema changes that keep the data: renaming columns, and altering their type, `required`,
`default`, `unique` or `options`, each checked against the rows before anything is changed.

`tables.definitions.patch_table` runs them in the admin request's one transaction, so a
PATCH applies whole or not at all. What names a column follows a rename in that transaction:
row policies and redaction of every role, index specs, the display column, the constraint
names derived from the column, and the old images of deletes in the change log (which the
feed's judge reads back as rows of the table). A conversion that some row cannot take is
refused with 422 and `details.rows` (at most 100), before any DDL runs.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from sqlalchemy import MetaData, Text, TextClause, cast, select, update
from sqlalchemy import column as sql_column
from sqlalchemy import table as sql_table
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.schema import AddConstraint

from authoric.catalog.model import ColumnAlter, ColumnDef, TableDef
from authoric.catalog.names import check_name
from authoric.catalog.schema import (
    compile_table,
    constraint_name,
    field_name,
    schema_name,
)
from authoric.catalog.types import BadValue, column_type, parse_text
from authoric.db import tables as t
from authoric.db.changelog import convert_old_images, rename_in_old_images
from authoric.db.sql import Sql, quoted, statement
from authoric.errors import Conflict, ValidationFailed
from authoric.tables.conversions import (
    CONVERSIONS,
    TEXTUAL,
    conversion_sql,
    rows_out_of_options,
    unconvertible_rows,
)
from authoric.tables.indexes import MAX_LISTED_ROWS, SEARCHABLE_TYPES, duplicate_rows


def _rename_column(table: tuple[str, str], old: str, new: str) -> TextClause:
    return statement("ALTER TABLE {table} RENAME COLUMN {old} TO {new}",
                     table=table, old=old, new=new)


def _drop_constraint(table: Sql, name: str) -> TextClause:
    return statement("ALTER TABLE {table} DROP CONSTRAINT {name}", table=table, name=name)


# Renames -------------------------------------------------------------------------------------

def check_renames(definition: TableDef, renames: dict[str, str]) -> None:
    """Every old name exists, every new one is valid, free, and given once; 422/409 else."""
    existing = {c.name for c in definition.columns}
    targets = list(renames.values())
    for old, new in renames.items():
        if old not in existing:
            raise ValidationFailed(f"no column {old!r} to rename", {"column": old})
        check_name(new, "column")
        if targets.count(new) > 1:
            raise ValidationFailed(f"two columns renamed to {new!r}", {"column": new})
    staying = existing - set(renames)
    taken = set(staying) | {f"{c.name}_uid" for c in definition.columns
                            if c.name in staying and column_type(c.type).is_reference}
    for old, new in renames.items():
        column = definition.column(old)
        assert column is not None
        names = {new, f"{new}_uid"} if column_type(column.type).is_reference else {new}
        if names & taken:
            raise Conflict(f"column name {new!r} is taken", {"column": new})


def renamed_filter(node: Any, renames: dict[str, str], references: frozenset[str]) -> Any:
    """A filter document (row policy) with its column names renamed; values untouched.
    `references` are the table's reference columns (old names): only their `x_uid` keys
    follow `x`; a text column that happens to be named `x_uid` stays put."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("and", "or") and isinstance(value, list):
            out[key] = [renamed_filter(v, renames, references) for v in value]
        elif key == "not":
            out[key] = renamed_filter(value, renames, references)
        else:
            out[_renamed_key(key, renames, references)] = value
    return out


def _renamed_key(key: str, renames: dict[str, str], references: frozenset[str]) -> str:
    if key in renames:
        return renames[key]
    if key.endswith("_uid") and key[:-4] in renames and key[:-4] in references:
        return f"{renames[key[:-4]]}_uid"
    return key


async def rename_columns(conn: AsyncConnection, app_uid: uuid.UUID, definition: TableDef,
                         renames: dict[str, str]) -> None:
    """Rename the physical columns and what derives its name from them; then every stored
    thing that names them (roles, the change log's old images). Catalog-only in PostgreSQL:
    no row is rewritten."""
    schema, table = schema_name(app_uid), definition.name
    target = (schema, table)
    references = frozenset(c.name for c in definition.columns
                           if column_type(c.type).is_reference)
    # Through temporary names, so that swapping two columns' names works.
    temporary = {old: f"_rename_{i}_{uuid.uuid4().hex[:8]}" for i, old in enumerate(renames)}
    for old, tmp in temporary.items():
        await conn.execute(_rename_column(target, old, tmp))
    for old, new in renames.items():
        await conn.execute(_rename_column(target, temporary[old], new))
        await _rename_derived(conn, schema, definition, old, new)
    for column in definition.columns:
        if column.name in renames:
            column.name = renames[column.name]
    if definition.display_column in renames:
        definition.display_column = renames[definition.display_column]
    await _rename_in_roles(conn, app_uid, table, renames, references)
    await rename_in_old_images(conn, app_uid, table, renames)


async def _rename_derived(conn: AsyncConnection, schema: str, definition: TableDef, old: str,
                          new: str) -> None:
    """Constraint (and unique index) names derive from the column's name: keep them derived."""
    column = definition.column(old)
    assert column is not None
    target = (schema, definition.name)
    kinds = [("ck", column.options is not None), ("fk", column_type(column.type).is_reference),
             ("uq", column.unique)]
    for kind, present in kinds:
        if not present:
            continue
        before, after = (constraint_name(kind, definition.name, n) for n in (old, new))
        if kind == "uq" and definition.soft_delete:  # a partial unique index, not a constraint
            await conn.execute(statement("ALTER INDEX {index} RENAME TO {name}",
                                         index=(schema, before), name=after))
        else:
            await conn.execute(statement("ALTER TABLE {table} RENAME CONSTRAINT {old} TO {new}",
                                         table=target, old=before, new=after))


async def _rename_in_roles(conn: AsyncConnection, app_uid: uuid.UUID, table: str,
                           renames: dict[str, str], references: frozenset[str]) -> None:
    rows = (await conn.execute(select(t.roles).where(t.roles.c.app_uid == app_uid)
                               .with_for_update())).all()
    for row in rows:
        policies, redact = dict(row.row_policies), dict(row.redact)
        if table in policies:
            policies[table] = renamed_filter(policies[table], renames, references)
        if table in redact:
            redact[table] = [renames.get(c, c) for c in redact[table]]
        if policies != row.row_policies or redact != row.redact:
            await conn.execute(update(t.roles).where(
                t.roles.c.app_uid == app_uid, t.roles.c.name == row.name,
            ).values(row_policies=policies, redact=redact))


def policy_columns(node: Any) -> set[str]:
    """The column keys a filter document (row policy) names, in every branch."""
    if not isinstance(node, dict):
        return set()
    found: set[str] = set()
    for key, value in node.items():
        if key in ("and", "or") and isinstance(value, list):
            for branch in value:
                found |= policy_columns(branch)
        elif key == "not":
            found |= policy_columns(value)
        else:
            found.add(key)
    return found


async def drop_from_roles(conn: AsyncConnection, app_uid: uuid.UUID, definition: TableDef,
                          dropped: list[str]) -> None:
    """Dropped columns leave the roles' redaction lists. A row policy naming one refuses the
    drop (422 naming the role): removing the condition would silently widen access."""
    table = definition.name
    names = set(dropped) | {f"{c.name}_uid" for c in definition.columns
                            if c.name in dropped and column_type(c.type).is_reference}
    rows = (await conn.execute(select(t.roles).where(t.roles.c.app_uid == app_uid)
                               .order_by(t.roles.c.name).with_for_update())).all()
    for row in rows:
        named = sorted(policy_columns(row.row_policies.get(table)) & names)
        if named:
            raise ValidationFailed(
                f"role {row.name!r} has a row policy on {table!r} naming {', '.join(named)}: "
                "change that policy before dropping the column",
                {"role": row.name, "table": table, "columns": named})
    for row in rows:
        redact = dict(row.redact)
        if not set(redact.get(table, [])) & set(dropped):
            continue
        kept = [c for c in redact[table] if c not in dropped]
        if kept:
            redact[table] = kept
        else:
            del redact[table]
        await conn.execute(update(t.roles).where(
            t.roles.c.app_uid == app_uid, t.roles.c.name == row.name).values(redact=redact))


# Alterations ----------------------------------------------------------------------------------

def altered(definition: TableDef, change: ColumnAlter, searched: set[str]) -> ColumnDef:
    """The column as `change` leaves it (checked like a new column); 422 for what cannot be."""
    column = definition.column(change.name)
    if column is None:
        raise ValidationFailed(f"no column {change.name!r} to alter", {"column": change.name})
    updates: dict[str, Any] = {}
    for field in ("type", "required", "default", "unique", "options"):
        if change.changes(field):
            value = getattr(change, field)
            if value is None and field in ("type", "required", "unique"):
                raise ValidationFailed(f"{field} cannot be null", {"column": change.name})
            updates[field] = value
    new_type = updates.get("type", column.type)
    if new_type != column.type:
        if (column.type, new_type) not in CONVERSIONS:
            raise ValidationFailed(f"column {column.name!r} cannot change from {column.type} "
                                   f"to {new_type}", {"column": column.name})
        if column.name in searched and new_type not in SEARCHABLE_TYPES:
            raise ValidationFailed(f"column {column.name!r} has a search index; drop it first",
                                   {"column": column.name})
        if new_type != "select" and "options" not in updates:
            updates["options"] = None
    return column.model_copy(update=updates).checked()


async def failing_rows(conn: AsyncConnection, app_uid: uuid.UUID, definition: TableDef,
                       before: ColumnDef, after: ColumnDef) -> list[dict[str, Any]]:
    """The rows (at most 100) that cannot take the change, as `{"uid", "column", "message"}`.
    Values are judged by the conversion's own SQL (`conversions`), never by a second parser."""
    target = quoted(schema_name(app_uid), definition.name)
    col = quoted(before.name)
    live = " AND deleted_at IS NULL" if definition.soft_delete else ""
    shown = field_name(after)
    found: list[dict[str, Any]] = []
    if after.required and not before.required:
        nulls = await conn.execute(statement(
            "SELECT uid FROM {target} WHERE {col} IS NULL{live} ORDER BY uid LIMIT :limit",
            target=target, col=col, live=Sql(live)), {"limit": MAX_LISTED_ROWS})
        found += [{"uid": str(u), "column": shown, "message": "required, but null"}
                  for u in nulls.scalars()]
    retyped = before.type != after.type
    if retyped:
        refused = await unconvertible_rows(conn, target, col, before, after,
                                           MAX_LISTED_ROWS - len(found))
        found += [{"uid": u, "column": shown, "message": m} for u, m in refused]
        if refused:  # the other checks read converted values: they would fail on these too
            return found
    if after.options is not None and (retyped or after.options != before.options):
        outside = await rows_out_of_options(conn, target, col, before, after,
                                            MAX_LISTED_ROWS - len(found))
        found += [{"uid": u, "column": shown, "message": "not one of the options"}
                  for u in outside]
    if after.unique and (retyped or not before.unique) and len(found) < MAX_LISTED_ROWS:
        # On the converted values: "01" and "1" are two texts but one integer.
        dupes = await duplicate_rows(conn, app_uid, definition, [before.name],
                                     [conversion_sql(col, before, after)])
        found += [{**d, "column": shown} for d in dupes[:MAX_LISTED_ROWS - len(found)]]
    return found


async def with_values(conn: AsyncConnection, app_uid: uuid.UUID, definition: TableDef,
                      before: ColumnDef, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`found` (failing rows) with each row's `value`: what the column holds now, as text
    (null for a null), so the operator sees what was refused, not only where."""
    if not found:
        return found
    rows = sql_table(definition.name, sql_column("uid", UUID()), sql_column(before.name),
                     schema=schema_name(app_uid))
    held = await conn.execute(select(rows.c.uid, cast(rows.c[before.name], Text)).where(
        rows.c.uid.in_([uuid.UUID(str(f["uid"])) for f in found])))
    values = {str(uid): value for uid, value in held}
    return [{**f, "value": values.get(str(f["uid"]))} for f in found]


async def alter_column(conn: AsyncConnection, app_uid: uuid.UUID, definition: TableDef,
                       before: ColumnDef, after: ColumnDef) -> None:
    """The DDL of one checked alteration (`required` and `default` are the catalog's alone)."""
    schema = schema_name(app_uid)
    target = quoted(schema, definition.name)
    col = quoted(before.name)
    check = constraint_name("ck", definition.name, before.name)
    if before.options is not None:
        await conn.execute(_drop_constraint(target, check))
    if before.type != after.type and column_type(before.type).pg_name != column_type(after.type).pg_name:
        await conn.execute(statement(
            "ALTER TABLE {target} ALTER COLUMN {col} TYPE {pg_type} USING {converted}",
            target=target, col=col, pg_type=Sql(column_type(after.type).pg_name),
            converted=Sql(conversion_sql(col, before, after))))
    if after.options is not None:
        compiled = compile_table(app_uid, definition, MetaData())  # holds `after`'s CHECK
        constraint = next(c for c in compiled.table.constraints if c.name == check)
        await conn.run_sync(lambda sync: sync.execute(AddConstraint(constraint)))
    if before.unique != after.unique:
        await _set_unique(conn, schema, definition, after)
    if before.type != after.type:
        # A value that does not convert becomes null: its row was never checked (it is gone).
        await convert_old_images(conn, app_uid, definition.name, before.name,
                                 lambda stored: _image_value(stored, before, after))


async def _set_unique(conn: AsyncConnection, schema: str, definition: TableDef,
                      column: ColumnDef) -> None:
    name = constraint_name("uq", definition.name, column.name)
    target = quoted(schema, definition.name)
    if column.unique and definition.soft_delete:
        await conn.execute(statement(
            "CREATE UNIQUE INDEX {name} ON {target} (org_uid, {col}) WHERE deleted_at IS NULL",
            name=name, target=target, col=column.name))
    elif column.unique:
        await conn.execute(statement(
            "ALTER TABLE {target} ADD CONSTRAINT {name} UNIQUE (org_uid, {col})",
            target=target, name=name, col=column.name))
    elif definition.soft_delete:
        await conn.execute(statement("DROP INDEX {index}", index=(schema, name)))
    else:
        await conn.execute(_drop_constraint(target, name))


def _image_value(stored: str, before: ColumnDef, after: ColumnDef) -> Any:
    """A stored image's value (as `->>` gives it) as the new type renders it; None if it
    does not convert."""
    try:
        if before.type == "timestamp" and after.type in TEXTUAL:
            return column_type("timestamp").render(parse_text("timestamp", stored))
        if (before.type, after.type) == ("timestamp", "date"):
            return parse_text("timestamp", stored).astimezone(dt.UTC).date().isoformat()
        if (before.type, after.type) == ("date", "timestamp"):
            day = parse_text("date", stored)
            return column_type("timestamp").render(
                dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC))
        if before.type == "numeric" and after.type == "integer":
            number = Decimal(stored)
            return int(number) if number == number.to_integral_value() else None
        if after.type in TEXTUAL:
            return stored
        return column_type(after.type).render(parse_text(after.type, stored))
    except (BadValue, ValueError, ArithmeticError):
        return None
