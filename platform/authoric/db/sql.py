"""SQL written by hand, in the platform's one style for it.

Statements that SQLAlchemy Core can build are built with it. The rest (DDL that names an
app's schema, tables, columns, constraints and indexes) are constant templates whose only
holes are identifiers: `statement()` fills them, every identifier quoted by `quoted()`, the
one function that quotes a name. Values are never pasted: they are bound (`:name`), except
in DDL, which binds nothing: there `literal()` quotes them."""

from __future__ import annotations

from sqlalchemy import TextClause, text


class Sql(str):
    """SQL text made from quoted identifiers (or a constant of our own), safe to put in a
    template's hole as it is."""


def quoted(*parts: str) -> Sql:
    """One identifier, or a dotted name (`schema`, `table`), quoted as PostgreSQL reads it."""
    return Sql(".".join('"' + part.replace('"', '""') + '"' for part in parts))


def literal(value: str) -> Sql:
    """A string constant, for the one place a value cannot be bound: DDL (a trigger's
    arguments). Quoted as PostgreSQL reads it with standard_conforming_strings (its default)."""
    return Sql("'" + value.replace("'", "''") + "'")


def joined(fragments: list[Sql] | list[str], separator: str = ", ") -> Sql:
    """Fragments in a list (identifiers are quoted; made fragments are kept as they are)."""
    return Sql(separator.join(_hole(f) for f in fragments))


def statement(template: str, **holes: str | Sql | tuple[str, ...]) -> TextClause:
    """`template` (a constant) with each `{hole}` filled: a plain string is one identifier
    and a tuple a dotted name, both quoted; a `Sql` goes in as it is."""
    return text(template.format(**{name: _hole(value) for name, value in holes.items()}))


def _hole(value: str | Sql | tuple[str, ...]) -> Sql:
    if isinstance(value, Sql):
        return value
    if isinstance(value, tuple):
        return quoted(*value)
    return quoted(value)
