"""Column types: their PostgreSQL type, how client values are parsed, how values are rendered.

Parsing is strict: a value of the wrong JSON type is refused rather than coerced, except
where the source is text (query strings, CSV), which `parse_text` handles.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.types import BigInteger, Boolean, Date, DateTime, Numeric, Text, TypeEngine

COLUMN_TYPES = ("text", "integer", "numeric", "boolean", "timestamp", "date", "uuid", "json",
                "reference")
INT64 = (-(2**63), 2**63 - 1)


class BadValue(ValueError):
    """A value that does not fit its column's type; the message says what was expected."""


def sql_type(column_type: str) -> TypeEngine[Any]:
    types: dict[str, Any] = {
        "text": Text(),
        "integer": BigInteger(),
        "numeric": Numeric(asdecimal=True),
        "boolean": Boolean(),
        "timestamp": DateTime(timezone=True),
        "date": Date(),
        "uuid": UUID(as_uuid=True),
        "json": JSONB(none_as_null=True),
        "reference": UUID(as_uuid=True),
    }
    chosen: TypeEngine[Any] = types[column_type]
    return chosen


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise BadValue("expected a string")
    if "\x00" in v:
        raise BadValue("NUL characters are not allowed")
    return v


def _integer(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise BadValue("expected an integer")
    if not INT64[0] <= v <= INT64[1]:
        raise BadValue("integer out of 64-bit range")
    return v


def _numeric(v: Any) -> Decimal:
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        raise BadValue("expected a decimal number or a string holding one")
    try:
        d = Decimal(str(v).strip())
    except InvalidOperation as exc:
        raise BadValue("expected a decimal number") from exc
    if not d.is_finite():
        raise BadValue("expected a finite decimal number")
    if abs(d.adjusted()) > 130000:
        raise BadValue("decimal out of range")
    return d


def _boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise BadValue("expected true or false")
    return v


def _timestamp(v: Any) -> dt.datetime:
    s = _text(v)
    try:
        t = dt.datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise BadValue("expected an RFC 3339 timestamp") from exc
    if t.tzinfo is None:
        raise BadValue("timestamp needs a UTC offset, e.g. 2026-01-31T12:00:00Z")
    return t


def _date(v: Any) -> dt.date:
    s = _text(v)
    try:
        return dt.date.fromisoformat(s)
    except ValueError as exc:
        raise BadValue("expected a date YYYY-MM-DD") from exc


def _uuid(v: Any) -> uuid.UUID:
    s = _text(v)
    try:
        return uuid.UUID(s)
    except ValueError as exc:
        raise BadValue("expected a UUID") from exc


def _json(v: Any) -> Any:
    return v


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "text": _text, "integer": _integer, "numeric": _numeric, "boolean": _boolean,
    "timestamp": _timestamp, "date": _date, "uuid": _uuid, "json": _json, "reference": _uuid,
}

_TRUE = {"true", "1", "yes", "t", "y"}
_FALSE = {"false", "0", "no", "f", "n"}


def parse_json(column_type: str, value: Any) -> Any:
    """The Python value for a JSON body value (None stays None)."""
    if value is None:
        return None
    return _PARSERS[column_type](value)


def parse_text(column_type: str, raw: str) -> Any:
    """The Python value for a textual value (query string, CSV cell)."""
    if column_type == "integer":
        try:
            return _integer(int(raw.strip()))
        except ValueError as exc:
            raise BadValue("expected an integer") from exc
    if column_type == "boolean":
        low = raw.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise BadValue("expected a boolean (true/false/1/0/yes/no)")
    if column_type == "json":
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise BadValue("expected JSON") from exc
    return _PARSERS[column_type](raw)


def render(column_type: str, value: Any) -> Any:
    """The JSON value of a stored value, as rows show it."""
    if value is None:
        return None
    if column_type == "numeric":
        return str(value)
    if column_type == "timestamp":
        return rfc3339(value)
    if column_type == "date":
        return value.isoformat()
    if column_type in ("uuid", "reference"):
        return str(value)
    return value


def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
