"""The per-app OpenAPI document's part for the multi-table stream, `GET /{app}/subscribe`
(contract section 5b): its parameters, answers and one schema per event type.

Called by `openapi.document`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_TABLES = 16
EVENTS = ("connected", "insert", "update", "delete", "resync", "reauth")


# How a stream resumes after a reconnect: every stream, of one table or several, takes both.
RESUME_PARAMETERS = (
    {"name": "lastEventId", "in": "query", "schema": {"type": "string"}},
    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
)


def stream_answer(events: dict[str, Any]) -> dict[str, Any]:
    """The 200 of a stream: Server-Sent Events whose frames carry one of `events`."""
    return {"description": "Server-Sent Events; each frame's data is one of the event schemas",
            "content": {"text/event-stream": {"schema": events}}}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Error"}}}}


def subscribe_schemas(tables: Sequence[str]) -> dict[str, Any]:
    """Schemas `subscribe.event.<type>`: a data frame names its table, and its row is that
    table's row schema."""
    names = {"enum": list(tables)} if tables else {"type": "string"}
    # anyOf, not oneOf: tables with the same columns have rows of the same shape.
    row = {"anyOf": [{"$ref": f"#/components/schemas/{t}"} for t in tables]}
    return {
        "subscribe.event.connected": {"type": "object", "properties": {
            "tables": {"type": "array", "items": names}, "live": {"const": True}}},
        "subscribe.event.insert": {"type": "object", "properties": {
            "op": {"const": "insert"}, "table": names, "row": row}},
        "subscribe.event.update": {"type": "object", "properties": {
            "op": {"const": "update"}, "table": names, "row": row}},
        "subscribe.event.delete": {"type": "object", "properties": {
            "op": {"const": "delete"}, "table": names,
            "rowUid": {"type": "string", "format": "uuid"}}},
        "subscribe.event.resync": {"type": "object", "required": ["reason"], "properties": {
            "reason": {"enum": ["bulk_change", "schema_change", "backfill_truncated",
                                "backfill_expired",
                                "invalid_position"]},
            "table": {**names, "description": "only when the resync concerns one table "
                                              "(`bulk_change`, `schema_change`)"},
            "lastId": {"type": "integer"}}},
        "subscribe.event.reauth": {"type": "object", "properties": {
            "reason": {"const": "token_expired"}}},
    }


def subscribe_paths(app: str, tables: Sequence[str]) -> dict[str, Any]:
    events = {"oneOf": [{"$ref": f"#/components/schemas/subscribe.event.{kind}"}
                        for kind in EVENTS]}
    names = {"enum": list(tables)} if tables else {"type": "string"}
    return {f"/{app}/subscribe": {"get": {
        "operationId": "subscribe_tables",
        "summary": "One Server-Sent Events stream for several tables",
        "parameters": [
            {"name": "tables", "in": "query", "required": True, "style": "form",
             "explode": False, "description": f"1 to {MAX_TABLES} table names, comma-separated",
             "schema": {"type": "array", "items": names, "minItems": 1,
                        "maxItems": MAX_TABLES}},
            *RESUME_PARAMETERS,
        ],
        "responses": {
            "200": stream_answer(events),
            "400": _error("`tables` names no table, or more than 16"),
            "401": _error("no token, or a bad one"),
            "403": _error("a table's list or read is switched off, or not granted"),
            "404": _error("unknown app or table"),
            "406": _error("no `Accept: text/event-stream`"),
            "429": _error("this user has too many open streams; see `Retry-After`"),
        },
    }}}
