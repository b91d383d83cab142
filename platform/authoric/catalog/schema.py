"""A table definition compiled to a SQLAlchemy `Table` in its app's schema.

Physical layout of a user table: `uid` (UUIDv7 primary key), `org_uid` (the tenant),
the owner's columns, `created_at`, `updated_at`, and `deleted_at` when soft delete is on.
Uniqueness is per org, so a 409 never reveals another tenant's values; references are
composite foreign keys on (org_uid, column), so a row can only point into its own org.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    Column,
    DateTime,
    ForeignKeyConstraint,
    Index,
    MetaData,
    Table,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import UUID

from authoric.catalog.model import ColumnDef, TableDef
from authoric.catalog.types import column_type, rfc3339, sql_type

SYSTEM_COLUMNS = ("uid", "org_uid", "created_at", "updated_at", "deleted_at")
# Names a row shows for the platform's own columns, and which physical column each is.
PLATFORM_FIELDS = {"uid": "uid", "createdAt": "created_at", "updatedAt": "updated_at"}


def constraint_name(kind: str, *parts: str) -> str:
    """A short, collision-free constraint name (identifiers stop at 63 bytes)."""
    return f"{kind}_" + hashlib.sha1("/".join(parts).encode()).hexdigest()[:20]


def schema_name(app_uid: uuid.UUID) -> str:
    return f"app_{app_uid.hex}"


def physical_column(column: ColumnDef) -> Column[Any]:
    return Column(column.name, sql_type(column.type), nullable=True)


def field_name(column: ColumnDef) -> str:
    """The key a row uses for this column (`vendor` → `vendor_uid`)."""
    return f"{column.name}_uid" if column_type(column.type).is_reference else column.name


@dataclass
class CompiledTable:
    """A user table ready for queries: its definition and its SQLAlchemy `Table`."""

    definition: TableDef
    table: Table
    by_field: dict[str, ColumnDef] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def soft_delete(self) -> bool:
        return self.definition.soft_delete

    def live(self) -> Any:
        """The clause that hides soft-deleted rows (true when soft delete is off)."""
        if self.soft_delete:
            return self.table.c.deleted_at.is_(None)
        return self.table.c.uid.isnot(None)

    @cached_property
    def renderers(self) -> tuple[tuple[str, str, Callable[[Any], Any]], ...]:
        """Per owner column: its row key, its physical name and its type's renderer."""
        return tuple((field_name(c), c.name, column_type(c.type).render)
                     for c in self.definition.columns)

    @cached_property
    def memo(self) -> dict[str, Any]:
        """What other modules derive from this table once (query.fields), kept with it."""
        return {}

    def row_json(self, mapping: Any, redacted: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The contract's row shape for a database row, with `redacted` columns masked."""
        out: dict[str, Any] = {"uid": str(mapping["uid"])}
        for key, name, render_value in self.renderers:
            if name in redacted:
                out[key] = "[redacted]"
            else:
                value = mapping[name]
                out[key] = None if value is None else render_value(value)
        out["createdAt"] = rfc3339(mapping["created_at"])
        out["updatedAt"] = rfc3339(mapping["updated_at"])
        return out

    def redact(self, shown: dict[str, Any], redacted: frozenset[str]) -> dict[str, Any]:
        """`shown` (a `row_json` with nothing redacted) as `row_json` would give it with
        `redacted` masked, without rendering its values again (the feed renders a row once
        for the read classes of an org that redact differently)."""
        if not redacted:
            return shown
        out = dict(shown)
        for key, name, _ in self.renderers:
            if name in redacted:
                out[key] = "[redacted]"
        return out


def _unique(definition: TableDef, column: ColumnDef) -> Any:
    """Unique per org; on soft-delete tables only among live rows (a deleted row frees its value)."""
    name = constraint_name("uq", definition.name, column.name)
    if definition.soft_delete:
        return Index(name, "org_uid", column.name, unique=True,
                     postgresql_where=text("deleted_at IS NULL"))
    return UniqueConstraint("org_uid", column.name, name=name)


def option_check(definition: TableDef, column: ColumnDef, physical: Column[Any]) -> Any:
    """The CHECK that keeps a `select` column within its options, whatever writes the row
    (the options are rendered as escaped literals by SQLAlchemy's DDL compiler)."""
    return CheckConstraint(physical.in_(column.options or []),
                           name=constraint_name("ck", definition.name, column.name))


def compile_table(app_uid: uuid.UUID, definition: TableDef, metadata: MetaData) -> CompiledTable:
    schema = schema_name(app_uid)
    columns: list[Any] = [
        Column("uid", UUID(as_uuid=True), primary_key=True),
        Column("org_uid", UUID(as_uuid=True), nullable=False),
    ]
    columns += [physical_column(c) for c in definition.columns]
    columns += [
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    ]
    if definition.soft_delete:
        columns.append(Column("deleted_at", DateTime(timezone=True)))
    constraints: list[Any] = [UniqueConstraint("org_uid", "uid", name=constraint_name("ou", definition.name))]
    by_name = {c.name: c for c in columns}
    for c in definition.columns:
        if c.options is not None:
            constraints.append(option_check(definition, c, by_name[c.name]))
        if c.unique:
            constraints.append(_unique(definition, c))
        if column_type(c.type).is_reference:
            constraints.append(ForeignKeyConstraint(
                ["org_uid", c.name],
                [f"{schema}.{c.references}.org_uid", f"{schema}.{c.references}.uid"],
                name=constraint_name("fk", definition.name, c.name),
            ))
    table = Table(definition.name, metadata, *columns, *constraints, schema=schema)
    compiled = CompiledTable(definition, table)
    compiled.by_field = {field_name(c): c for c in definition.columns}
    return compiled
