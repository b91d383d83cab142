"""The built-in column types, one class each, and `BUILTIN`, the list the registry is made of.

To add a type, write its class here and add an instance to `BUILTIN` (see docs/types.md).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson
from sqlalchemy import types as sa
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.types import TypeEngine

from authoric.catalog.types.base import BadValue, ColumnType, require_string

INT64 = (-(2**63), 2**63 - 1)
# Deepest nesting a `json` value may have. PostgreSQL and our encoders go deeper, but a value
# this deep is never data, and capping it keeps every later read of the row answerable. The
# same as the cap on a whole request body (http/bodies.py), so CSV and the SDK agree with REST.
MAX_JSON_DEPTH = 32  # arrays and objects inside one another: in a json value, in any body
# Decimal exponents beyond this are not numbers anyone stores; PostgreSQL's numeric stops there.
MAX_DECIMAL_EXPONENT = 130_000
TRUE_WORDS = ("true", "1", "yes", "t", "y")
FALSE_WORDS = ("false", "0", "no", "f", "n")
# Numbers as the fast CSV path lets PostgreSQL read them; anything else goes to the careful path.
PLAIN_INTEGER = r"^\s*[+-]?[0-9]+\s*$"
PLAIN_DECIMAL = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
# An ISO 8601 / RFC 3339 timestamp that carries an offset, as the fast CSV path checks it in SQL.
ISO_TIMESTAMP_WITH_OFFSET = r"^\s*\d{4}-\d{2}-\d{2}[Tt ].*([Zz]|[+-]\d{2}(:?\d{2})?)\s*$"


def rfc3339(t: dt.datetime) -> str:
    """A timestamp as rows show it: UTC, `Z` suffix."""
    if t.tzinfo is not dt.UTC:
        t = t.astimezone(dt.UTC)
    # orjson writes RFC 3339 as isoformat() does (microseconds only when there are some), in
    # a quarter of the time; a page of rows renders dozens of timestamps.
    return orjson.dumps(t, option=orjson.OPT_UTC_Z)[1:-1].decode()


def _sql_words(words: tuple[str, ...]) -> str:
    return ", ".join(f"'{w}'" for w in words)


class Text(ColumnType):
    name, pg_name = "text", "text"
    schema = {"type": "string"}
    textual = free_text = True

    def sql_type(self) -> TypeEngine[Any]:
        return sa.Text()

    def parse_json(self, value: Any) -> str:
        return require_string(value)

    def parse_filter(self, raw: Any) -> str:
        return self.parse_json(raw)

    def csv_cast(self, ref: str) -> str:
        return ref


class Select(Text):
    """A text value out of the column's fixed `options` (checked by the column, which knows
    them: `ColumnDef.parse_json`, and a CHECK constraint in the table)."""

    name, pg_name = "select", "text"
    takes_options = True
    free_text = False  # one of the options the app's owner wrote, not a client's words


class Integer(ColumnType):
    """A 64-bit integer. JSON floats with no fraction (`2.0`) are accepted; booleans are not."""

    name, pg_name = "integer", "bigint"
    schema = {"type": "integer", "format": "int64"}
    # PostgreSQL 16 also reads `0x10`, `0o7`, `0b1` and `1_000`; Python's int() does not
    # read all of them the same way, so the careful parser judges anything but digits.
    plain_text = PLAIN_INTEGER

    def sql_type(self) -> TypeEngine[Any]:
        return sa.BigInteger()

    def parse_json(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise BadValue("expected an integer")
        if not INT64[0] <= value <= INT64[1]:
            raise BadValue("integer out of 64-bit range")
        return value

    def parse_text(self, raw: str) -> int:
        try:
            return self.parse_json(int(raw.strip()))
        except ValueError as exc:
            raise BadValue("expected an integer") from exc


class Numeric(ColumnType):
    """An exact decimal; travels as a JSON string (`"8760.00"`) so no digit is lost."""

    name, pg_name = "numeric", "numeric"
    schema = {"type": "string", "format": "decimal"}
    # Plain decimal notation only: PostgreSQL 16 also reads `0x10` and `1_000`, and every
    # version reads NaN and infinities, which the careful parser refuses or must judge.
    plain_text = PLAIN_DECIMAL

    def sql_type(self) -> TypeEngine[Any]:
        return sa.Numeric(asdecimal=True)

    def parse_json(self, value: Any) -> Decimal:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise BadValue("expected a decimal number or a string holding one")
        try:
            d = Decimal(str(value).strip())
        except InvalidOperation as exc:
            raise BadValue("expected a decimal number") from exc
        if not d.is_finite():
            raise BadValue("expected a finite decimal number")
        if abs(d.adjusted()) > MAX_DECIMAL_EXPONENT:
            raise BadValue("decimal out of range")
        return d

    def render(self, value: Any) -> str:
        return str(value)


class Boolean(ColumnType):
    """JSON `true`/`false` only; as text, the words of TRUE_WORDS and FALSE_WORDS."""

    name, pg_name = "boolean", "boolean"
    schema = {"type": "boolean"}

    def sql_type(self) -> TypeEngine[Any]:
        return sa.Boolean()

    def parse_json(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise BadValue("expected true or false")
        return value

    def parse_text(self, raw: str) -> bool:
        low = raw.strip().lower()
        if low in TRUE_WORDS:
            return True
        if low in FALSE_WORDS:
            return False
        raise BadValue("expected a boolean (true/false/1/0/yes/no)")

    def csv_cell(self, value: Any) -> str:
        return "true" if value else "false"

    def csv_cast(self, ref: str) -> str:
        # PostgreSQL's boolean input takes other spellings (`on`, `of`...): map ours ourselves.
        return (f"CASE WHEN lower(trim({ref})) IN ({_sql_words(TRUE_WORDS)}) "
                f"THEN true WHEN {ref} IS NOT NULL THEN false END")

    def csv_suspicious(self, ref: str) -> str:
        return f"lower(trim({ref})) NOT IN ({_sql_words((*TRUE_WORDS, *FALSE_WORDS))})"


class Timestamp(ColumnType):
    """An RFC 3339 instant; an offset is required, so no value is read in a guessed zone."""

    name, pg_name = "timestamp", "timestamptz"
    schema = {"type": "string", "format": "date-time"}
    plain_text = ISO_TIMESTAMP_WITH_OFFSET

    def sql_type(self) -> TypeEngine[Any]:
        return sa.DateTime(timezone=True)

    def parse_json(self, value: Any) -> dt.datetime:
        s = require_string(value)
        try:
            t = dt.datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError as exc:
            raise BadValue("expected an RFC 3339 timestamp") from exc
        if t.tzinfo is None:
            raise BadValue("timestamp needs a UTC offset, e.g. 2026-01-31T12:00:00Z")
        return t

    def parse_text(self, raw: str) -> dt.datetime:
        # Text sources (CSV cells, query strings) may pad values, as for numbers.
        return self.parse_json(raw.strip())

    def render(self, value: Any) -> str:
        return rfc3339(value)


class Date(ColumnType):
    name, pg_name = "date", "date"
    schema = {"type": "string", "format": "date"}
    plain_text = r"^\s*\d{4}-\d{2}-\d{2}\s*$"

    def sql_type(self) -> TypeEngine[Any]:
        return sa.Date()

    def parse_json(self, value: Any) -> dt.date:
        s = require_string(value)
        try:
            return dt.date.fromisoformat(s)
        except ValueError as exc:
            raise BadValue("expected a date YYYY-MM-DD") from exc

    def parse_text(self, raw: str) -> dt.date:
        return self.parse_json(raw.strip())

    def render(self, value: Any) -> str:
        return str(value.isoformat())


class Uuid(ColumnType):
    name, pg_name = "uuid", "uuid"
    schema = {"type": "string", "format": "uuid"}

    def sql_type(self) -> TypeEngine[Any]:
        return UUID(as_uuid=True)

    def parse_json(self, value: Any) -> uuid.UUID:
        s = require_string(value)
        try:
            return uuid.UUID(s)
        except ValueError as exc:
            raise BadValue("expected a UUID") from exc

    def render(self, value: Any) -> str:
        return str(value)


class Reference(Uuid):
    """The uid of a row of another table of the app, in the same org (a composite foreign key)."""

    name, pg_name = "reference", "uuid"
    is_reference = True


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` nests arrays/objects deeper than `limit` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def json_nul_path(value: Any) -> str | None:
    """Where a key or string in `value` holds NUL (U+0000), which neither text nor jsonb can
    store: the dotted path of the first one found (`""` for `value` itself), or None
    (iterative: no recursion)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return path
        elif isinstance(node, dict):
            for key, child in node.items():
                at = f"{path}.{key}" if path else str(key)
                if "\x00" in key:
                    return at
                stack.append((child, at))
        elif isinstance(node, list):
            stack.extend((child, f"{path}.{i}" if path else str(i)) for i, child in enumerate(node))
    return None


class Json(ColumnType):
    """Any JSON value, stored as jsonb, nested at most MAX_JSON_DEPTH levels."""

    name, pg_name = "json", "jsonb"
    schema = {}
    ordered = False
    free_text = True

    def sql_type(self) -> TypeEngine[Any]:
        return JSONB(none_as_null=True)

    def parse_json(self, value: Any) -> Any:
        if json_depth_exceeds(value, MAX_JSON_DEPTH):
            raise BadValue(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        if json_nul_path(value) is not None:
            raise BadValue("NUL characters (\\u0000) cannot be stored, in a key or a string")
        return value

    def parse_text(self, raw: str) -> Any:
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise BadValue("expected JSON") from exc
        return self.parse_json(value)

    def parse_filter(self, raw: Any) -> Any:
        return self.parse_json(raw)  # a string is a JSON string, not JSON text to read

    def csv_cell(self, value: Any) -> str:
        return json.dumps(value, separators=(",", ":"))

    def csv_suspicious(self, ref: str) -> str:
        # Depth is not a SQL question; more opening brackets than the cap (strings included)
        # may be too deep, and the careful parser then decides.
        return f"length(regexp_replace({ref}, '[^[{{]', '', 'g')) > {MAX_JSON_DEPTH}"

    def bind_value(self, parsed: Any) -> str:
        return json.dumps(parsed)

    def copy_value(self, parsed: Any, raw: str) -> str:
        # The text as written, once checked: jsonb reads its numbers exactly (`1e400`, which
        # a round trip through a Python float would turn into an invalid `Infinity`).
        return raw


BUILTIN: tuple[ColumnType, ...] = (
    Text(), Integer(), Numeric(), Boolean(), Timestamp(), Date(), Uuid(), Json(), Reference(),
    Select(),
)
