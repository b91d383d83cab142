"""Column kinds, read from the app's OpenAPI document (contract section 6), and the values of
each kind turned into keys that compare as PostgreSQL compares them. Pure: no I/O.

A live query uses them to decide filters and orders on numbers, decimals, dates, timestamps
and uids without asking the server: `"9.99" < "10.5"` as decimals, not as text. A value that
does not parse as its kind (`"[redacted]"`, a filter argument spelled oddly) has no key, and
the caller asks the server instead. Text has no key: its order is the database's collation.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

Kind = Literal["integer", "numeric", "boolean", "timestamp", "date", "uuid", "text", "json"]
Kinds = Mapping[str, Kind]
ORDERED: frozenset[str] = frozenset({"integer", "numeric", "boolean", "timestamp", "date", "uuid"})
_REDACTED = {"type": "string", "enum": ["[redacted]"]}
_INTEGER = re.compile(r"-?\d+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_FORMATS: dict[str, Kind] = {"decimal": "numeric", "date-time": "timestamp", "date": "date",
                             "uuid": "uuid"}


def _kind(schema: Mapping[str, Any]) -> Kind:
    branches = schema.get("anyOf", [schema])
    base: Mapping[str, Any] = next((b for b in branches if b.get("type") != "null" and b != _REDACTED), {})
    kind, fmt = base.get("type"), base.get("format")
    if kind in ("integer", "boolean"):
        return "integer" if kind == "integer" else "boolean"
    if kind != "string":
        return "json"
    return _FORMATS.get(str(fmt), "text")


def kinds_of(doc: Mapping[str, Any], table: str) -> dict[str, Kind]:
    """The kind of every field of `table`'s rows in the app's OpenAPI document (`{}` when the
    document does not describe the table)."""
    schema = doc.get("components", {}).get("schemas", {}).get(table) or {}
    return {name: _kind(prop) for name, prop in (schema.get("properties") or {}).items()}


def key(kind: Kind, value: Any) -> Any | None:
    """`value` as a key that compares like the column's values in PostgreSQL; None when it
    cannot be had here (no such order on the client, or a value that is not of the kind)."""
    try:
        if kind == "integer":
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            return int(value) if isinstance(value, str) and _INTEGER.fullmatch(value) else None
        if kind == "boolean":
            return int(value) if isinstance(value, bool) else None
        if kind == "numeric":
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                return None
            number = Decimal(str(value).strip())
            return number if number.is_finite() else None
        if kind == "timestamp":
            moment = datetime.fromisoformat(value) if isinstance(value, str) else None
            return moment if moment is not None and moment.tzinfo is not None else None
        if kind == "date":
            return date.fromisoformat(value) if isinstance(value, str) and _DATE.fullmatch(value) \
                else None
        if kind == "uuid":
            return uuid.UUID(value) if isinstance(value, str) else None
    except (ValueError, InvalidOperation):
        return None
    return None
