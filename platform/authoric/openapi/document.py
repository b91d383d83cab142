"""The OpenAPI document of one app: a row schema per table and that table's routes.

The admin sees every table; a member sees only the tables one of its roles lets it read
(`read_list` or `read`), so the document reveals no table the member could not find otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from authoric.catalog.enforcer import granting_roles
from authoric.catalog.model import ColumnDef
from authoric.catalog.schema import CompiledTable, field_name
from authoric.catalog.snapshot import AppSnapshot
from authoric.catalog.types import column_type
from authoric.openapi.subscribe import (
    RESUME_PARAMETERS,
    stream_answer,
    subscribe_paths,
    subscribe_schemas,
)
from authoric.policy.principal import Principal

READ_ACTIONS = ("read_list", "read")

_ERROR = {"$ref": "#/components/schemas/Error"}
_REDACTED = {"type": "string", "enum": ["[redacted]"]}


def _column_schema(column: ColumnDef, readable: bool) -> dict[str, Any]:
    base = column_type(column.type).json_schema()
    if column.options is not None:  # a select: one of its options
        base = {**base, "enum": list(column.options)}
    if not base:  # any JSON value: null and "[redacted]" included already
        return {"description": "any JSON value"} if readable else {}
    nullable = {"anyOf": [base, {"type": "null"}]}
    return {"anyOf": [*nullable["anyOf"], _REDACTED]} if readable else nullable


def row_schema(table: CompiledTable, indexes: list[dict[str, Any]] | None = None
               ) -> dict[str, Any]:
    props: dict[str, Any] = {"uid": {"type": "string", "format": "uuid"}}
    for column in table.definition.columns:
        props[field_name(column)] = _column_schema(column, readable=True)
    props["createdAt"] = {"type": "string", "format": "date-time"}
    props["updatedAt"] = {"type": "string", "format": "date-time"}
    doc: dict[str, Any] = {"type": "object", "properties": props, "required": ["uid"]}
    if table.definition.display is not None:
        doc["x-display-column"] = table.definition.display
    if indexes:
        doc["x-indexes"] = indexes  # what filters, orders and searches are served by
    return doc


def input_schema(table: CompiledTable, creating: bool) -> dict[str, Any]:
    props = {field_name(c): _column_schema(c, readable=False) for c in table.definition.columns}
    required = [field_name(c) for c in table.definition.columns
                if creating and c.required and c.default is None]
    doc: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        doc["required"] = required
    return doc


def _responses(ok: str, schema: dict[str, Any] | None, *codes: int) -> dict[str, Any]:
    out: dict[str, Any] = {ok: {"description": "success"}}
    if schema is not None:
        out[ok]["content"] = {"application/json": {"schema": schema}}
    for code in (401, 403, 404, *codes):
        out[str(code)] = {"description": "error",
                          "content": {"application/json": {"schema": _ERROR}}}
    return out


def _event_schemas(name: str) -> dict[str, Any]:
    row = {"$ref": f"#/components/schemas/{name}"}
    return {
        f"{name}.event.connected": {"type": "object", "properties": {
            "table": {"type": "string"}, "live": {"type": "boolean"}}},
        f"{name}.event.insert": {"type": "object", "properties": {
            "op": {"const": "insert"}, "table": {"type": "string"}, "row": row}},
        f"{name}.event.update": {"type": "object", "properties": {
            "op": {"const": "update"}, "table": {"type": "string"}, "row": row}},
        f"{name}.event.delete": {"type": "object", "properties": {
            "op": {"const": "delete"}, "table": {"type": "string"},
            "rowUid": {"type": "string", "format": "uuid"}}},
        f"{name}.event.resync": {"type": "object", "properties": {
            "reason": {"enum": ["bulk_change", "schema_change", "backfill_truncated",
                                "backfill_expired",
                                "invalid_position"]},
            "lastId": {"type": "integer"}}},
        f"{name}.event.reauth": {"type": "object", "properties": {"reason": {"const": "token_expired"}}},
    }


def _table_paths(app: str, table: CompiledTable) -> dict[str, Any]:
    name = table.name
    row = {"$ref": f"#/components/schemas/{name}"}
    page = {"type": "object", "properties": {"items": {"type": "array", "items": row},
                                             "next": {"type": ["string", "null"]},
                                             "total": {"type": "integer",
                                                       "description": "with ?count=exact"}}}
    expand = {"name": "expand", "in": "query", "schema": {"type": "string"},
              "description": "reference columns to expand, comma-separated, dotted up to two "
                             "levels (vendor.country)"}
    uid_param = {"name": "uid", "in": "path", "required": True,
                 "schema": {"type": "string", "format": "uuid"}}
    list_params = [
        {"name": "order", "in": "query", "schema": {"type": "string"}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1,
                                                     "maximum": 1000}},
        {"name": "after", "in": "query", "schema": {"type": "string"}},
        {"name": "filter", "in": "query", "schema": {"type": "string"},
         "description": "URL-encoded JSON filter"},
        {"name": "count", "in": "query", "schema": {"enum": ["exact"]}},
        expand,
    ]
    body = {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{name}.create"}}}}
    patch_body = {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{name}.update"}}}}
    events = {"oneOf": [{"$ref": f"#/components/schemas/{name}.event.{kind}"} for kind in
                        ("connected", "insert", "update", "delete", "resync", "reauth")]}
    base = f"/{app}/autocrud/{name}"
    return {
        base: {
            "get": {"operationId": f"list_{name}", "parameters": list_params,
                    "responses": _responses("200", page, 400)},
            "post": {"operationId": f"create_{name}", "requestBody": body,
                     "parameters": [expand],
                     "responses": _responses("201", row, 400, 409, 415, 422)},
        },
        f"{base}/{{uid}}": {
            "parameters": [uid_param],
            "get": {"operationId": f"read_{name}", "parameters": [expand],
                    "responses": _responses("200", row, 400)},
            "patch": {"operationId": f"update_{name}", "requestBody": patch_body,
                      "parameters": [expand],
                      "responses": _responses("200", row, 400, 409, 415, 422)},
            "delete": {"operationId": f"delete_{name}", "responses": _responses("204", None, 409)},
        },
        f"{base}/subscribe": {
            "get": {
                "operationId": f"subscribe_{name}",
                "parameters": [*RESUME_PARAMETERS, expand],
                "responses": {
                    "200": stream_answer(events),
                    **{k: v for k, v in _responses("200", None, 400, 406).items() if k != "200"},
                },
            },
        },
    }


def readable_tables(snapshot: AppSnapshot, principal: Principal) -> list[CompiledTable]:
    """The tables `principal` may list or read (the app itself, via the SDK: all of them)."""
    if principal.acting_as_app:
        return list(snapshot.tables.values())
    return [table for table in snapshot.tables.values() if any(
        granting_roles(snapshot.enforcer, principal.roles, table.name, action)
        for action in READ_ACTIONS)]


def member_openapi(snapshot: AppSnapshot, principal: Principal) -> dict[str, Any]:
    """The app's document as `principal` may see it."""
    return app_openapi(snapshot, readable_tables(snapshot, principal))


def app_openapi(snapshot: AppSnapshot,
                tables: Iterable[CompiledTable] | None = None) -> dict[str, Any]:
    """The app's document describing `tables` (default: all of them, as the admin sees it)."""
    schemas: dict[str, Any] = {"Error": {"type": "object", "required": ["error"], "properties": {
        "error": {"type": "object", "required": ["code", "message", "details"], "properties": {
            "code": {"type": "string"}, "message": {"type": "string"},
            "details": {"type": "object"}}}}}}
    paths: dict[str, Any] = {}
    shown = list(snapshot.tables.values() if tables is None else tables)
    for table in shown:
        schemas[table.name] = row_schema(table, snapshot.indexes.get(table.name))
        schemas[f"{table.name}.create"] = input_schema(table, creating=True)
        schemas[f"{table.name}.update"] = input_schema(table, creating=False)
        schemas.update(_event_schemas(table.name))
        paths.update(_table_paths(snapshot.name, table))
    # The multi-table stream's part (openapi/subscribe.py).
    # Only the tables shown: a member's document names no table it may not read.
    if shown:
        paths.update(subscribe_paths(snapshot.name, [t.name for t in shown]))
        schemas.update(subscribe_schemas([t.name for t in shown]))
    return {
        "openapi": "3.1.0",
        "info": {"title": f"Authoric app {snapshot.name}", "version": str(snapshot.version)},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}},
        "security": [{"bearer": []}],
    }
