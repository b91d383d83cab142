"""What a column type is: the one interface every type in the registry implements.

A type answers, for its values, every question the platform asks in one place: how the value
is stored (SQL type, and the PostgreSQL name casts use), how a client's value is parsed (from
JSON, and from text: query strings and CSV cells), how a stored value is shown in a row (JSON),
how it is documented (JSON Schema, for the per-app OpenAPI document), and how the CSV fast path
casts a raw text cell and spots cells PostgreSQL would accept but our parser refuses.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy.types import TypeEngine


class BadValue(ValueError):
    """A value that does not fit its column's type; the message says what was expected."""


def require_string(value: Any) -> str:
    """`value` when it is a string PostgreSQL can store (no NUL); else BadValue."""
    if not isinstance(value, str):
        raise BadValue("expected a string")
    if "\x00" in value:
        raise BadValue("NUL characters are not allowed")
    return value


class ColumnType:
    """One column type. Subclasses set the class attributes and override what differs.

    Parsing never sees None (a null is null for every type); rendering never sees None either.
    """

    name: ClassVar[str]
    # The PostgreSQL type name, as written in `CAST(x AS <pg_name>)`.
    pg_name: ClassVar[str]
    # JSON Schema of the rendered (and accepted) value, null excluded (`json_schema()`).
    schema: ClassVar[dict[str, Any]]
    # Where PostgreSQL's cast reads more than `parse_text` does: the pattern (a POSIX regular
    # expression) of the text cells both read alike; the rest go to the careful CSV path
    # (`csv_suspicious()`). None: the cast and the parser agree, or the type says otherwise.
    plain_text: ClassVar[str | None] = None
    # True for a column that points at a row of another table (`references` is then required,
    # and rows show the value under `<name>_uid`).
    is_reference: ClassVar[bool] = False
    # True for a column whose values are one of its own fixed `options` (`options` is then
    # required, and allowed nowhere else).
    takes_options: ClassVar[bool] = False
    # True for words a person writes and searches: `like` and `search` filters apply, and a
    # `search` index can hold the column.
    textual: ClassVar[bool] = False
    # False where `lt`/`gt` mean nothing to a client (json): only equality filters apply.
    ordered: ClassVar[bool] = True
    # True for values a client writes freely (text, json): a CSV export neutralises the ones a
    # spreadsheet would run as a formula.
    free_text: ClassVar[bool] = False

    def sql_type(self) -> TypeEngine[Any]:
        """The SQLAlchemy type of the physical column."""
        raise NotImplementedError

    def parse_json(self, value: Any) -> Any:
        """The Python value for a JSON value. Strict: a value of the wrong JSON type is refused."""
        raise NotImplementedError

    def parse_text(self, raw: str) -> Any:
        """The Python value for a textual value (query string, CSV cell, cursor)."""
        return self.parse_json(raw)

    def parse_filter(self, raw: Any) -> Any:
        """A filter's value: a string is text to read (a query string carries nothing else),
        except for types whose values are themselves strings, or any JSON (overridden)."""
        return self.parse_text(raw) if isinstance(raw, str) else self.parse_json(raw)

    def render(self, value: Any) -> Any:
        """The JSON value rows show for a stored value."""
        return value

    def csv_cell(self, value: Any) -> str:
        """The CSV text of a rendered value (never None)."""
        return str(value)

    def json_schema(self) -> dict[str, Any]:
        """JSON Schema of the rendered (and accepted) value, null excluded: a fresh copy."""
        return dict(self.schema)

    def csv_cast(self, ref: str) -> str:
        """SQL casting the text expression `ref` (a raw CSV cell, never empty) to this type."""
        return f"{ref}::{self.pg_name}"

    def csv_suspicious(self, ref: str) -> str | None:
        """SQL that is true for a non-null cell PostgreSQL would cast but `parse_text` refuses;
        None when PostgreSQL's cast and our parser agree."""
        return None if self.plain_text is None else f"{ref} !~ '{self.plain_text}'"

    def bind_value(self, parsed: Any) -> Any:
        """A parsed value as a bound parameter of `CAST(:p AS <pg_name>)` in raw SQL."""
        return parsed

    def copy_value(self, parsed: Any, raw: str) -> Any:
        """A value parsed from the text `raw`, as a binary COPY into a column of `pg_name`
        takes it."""
        return parsed
