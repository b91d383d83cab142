"""The row model of a table: a client's row body turned, at the edge, into typed column values
(known fields only, each parsed by its column type, server fields refused). Services take the
typed values, never the body."""

from __future__ import annotations

from typing import Any

from authoric.catalog.schema import CompiledTable
from authoric.catalog.types import BadValue
from authoric.errors import ValidationFailed

# Fields only the server sets. A body naming one is a mass-assignment attempt: refused.
SERVER_FIELDS = frozenset({"uid", "createdAt", "updatedAt", "created_at", "updated_at", "org",
                           "org_uid", "orgUid", "deletedAt", "deleted_at"})


def column_values(table: CompiledTable, body: Any, *, creating: bool) -> dict[str, Any]:
    """Column name → Python value for a create or a partial update; 422 with details otherwise."""
    if not isinstance(body, dict):
        raise ValidationFailed("the row must be a JSON object")
    server = sorted(set(body) & SERVER_FIELDS)
    if server:
        raise ValidationFailed(f"{', '.join(server)} are set by the server",
                               {"fields": server, "reason": "server_managed"})
    values: dict[str, Any] = {}
    problems: list[dict[str, str]] = []
    for key, raw in body.items():
        column = table.by_field.get(key) or table.definition.column(key)
        if column is None:
            problems.append({"column": key, "message": "unknown column"})
            continue
        if column.name in values:
            problems.append({"column": key, "message": "given twice"})
            continue
        try:
            values[column.name] = column.parse_json(raw)
        except BadValue as exc:
            problems.append({"column": key, "message": str(exc)})
    for column in table.definition.columns:
        if creating and column.name not in values and column.default is not None:
            values[column.name] = column.parse_json(column.default)
        missing = values.get(column.name) is None and (creating or column.name in values)
        if column.required and missing:
            problems.append({"column": column.name, "message": "required"})
    if problems:
        raise ValidationFailed("the row does not fit the table", {"errors": problems})
    return values


def bulk_set_values(table: CompiledTable, body: Any) -> dict[str, Any]:
    """The typed values of a bulk update body `{"set": {...}}`."""
    if not isinstance(body, dict) or set(body) != {"set"}:
        raise ValidationFailed("a bulk update body is {\"set\": {...}}")
    return column_values(table, body["set"], creating=False)
