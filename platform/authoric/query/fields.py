"""Which names a filter or an order may use on a table, and the column each one means."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from authoric.catalog.schema import CompiledTable, field_name


@dataclass(frozen=True)
class FieldRef:
    """A filterable field: the SQL column, its contract type and the column it belongs to."""

    name: str
    column: Any
    type: str
    owner_column: str | None  # the owner's column name; None for platform fields


def table_fields(compiled: CompiledTable) -> dict[str, FieldRef]:
    """Every name a filter may use: platform fields, row keys, and reference column names
    (worked out once per compiled table)."""
    found: dict[str, FieldRef] | None = compiled.memo.get("fields")
    if found is None:
        found = compiled.memo["fields"] = _fields(compiled)
    return found


def _fields(compiled: CompiledTable) -> dict[str, FieldRef]:
    c = compiled.table.c
    fields = {
        "uid": FieldRef("uid", c.uid, "uuid", None),
        "createdAt": FieldRef("createdAt", c.created_at, "timestamp", None),
        "updatedAt": FieldRef("updatedAt", c.updated_at, "timestamp", None),
    }
    for column in compiled.definition.columns:
        ref = FieldRef(field_name(column), c[column.name], column.type, column.name)
        fields[ref.name] = ref
        fields.setdefault(column.name, ref)
    return fields
