"""How a column's values change type: the one SQL expression that converts them (the `USING`
of `ALTER COLUMN ... TYPE`), and the checks that run that very expression over the rows
before anything changes.

The check and the conversion cannot disagree because they are the same SQL: a row the check
lets through is a row the `ALTER` converts, and a row the `ALTER` would choke on is one the
check lists. The expression is stricter than PostgreSQL's bare casts where those read more
than a client may write (`on` as a boolean, `today` as a date, a timestamp without an offset,
`NaN`): such a value is refused by the expression itself, with the type's own rules
(`ColumnType.csv_suspicious`), never converted into something nobody wrote.

Finding the failing rows: one statement evaluates the expression over every row; only when it
fails are the rows split, page by page and then by halves under a savepoint each, until each
failing row stands alone (about 14 statements per failing row in a page of 10,000).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import TextClause
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.model import ColumnDef
from authoric.catalog.types import COLUMN_TYPES, TEXTUAL_TYPES, column_type
from authoric.db.errors import sqlstate
from authoric.db.sql import Sql, statement

# Type changes allowed (contract section 2): text to and from the others, integer ↔ numeric,
# date ↔ timestamp. `select` is text with options.
TEXTUAL = TEXTUAL_TYPES
FROM_TEXT = frozenset({"integer", "numeric", "boolean", "date", "timestamp", "uuid"})
CONVERSIONS = frozenset(
    {(a, b) for a in TEXTUAL for b in FROM_TEXT | TEXTUAL if a != b}
    | {(b, a) for a in TEXTUAL for b in FROM_TEXT}
    | {("integer", "numeric"), ("numeric", "integer"), ("date", "timestamp"),
       ("timestamp", "date")})



def conversion_table() -> dict[str, list[str]]:
    """For each column type, the types a column of it may become: itself first, then the
    others in the order of COLUMN_TYPES. What the console offers (GET /admin/column-types),
    read from the one table the server checks."""
    return {a: [a, *(b for b in COLUMN_TYPES if (a, b) in CONVERSIONS)] for a in COLUMN_TYPES}


CHECK_PAGE = 10_000  # rows split per page once the whole table's check has failed
# A value no input function of ours reads: prefixed to a refused value, its cast fails.
UNREADABLE = "chr(1)"
# SQLSTATEs of "this text is not a value of that type"; others (out of range) say more.
SYNTAX_STATES = frozenset({"22P02", "22007"})


def as_text(col: str, type_name: str) -> str:
    """SQL: the column's value as the text a client would have sent for it."""
    if type_name == "timestamp":
        return (f"to_char({col} AT TIME ZONE 'UTC', "
                "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
    return f"{col}::text"


def _refused(value_text: str, pg_name: str) -> str:
    """SQL that fails, as a cast of `value_text` to `pg_name` would, for any row it runs on.
    It names the value, so PostgreSQL cannot fold it into a constant error at planning."""
    return f"CAST({UNREADABLE} || {value_text} AS {pg_name})"


def conversion_sql(col: str, before: ColumnDef, after: ColumnDef) -> str:
    """The expression converting the column's values from `before`'s type to `after`'s: null
    stays null, a value the new type cannot hold makes the statement fail (SQLSTATE 22...)."""
    src, dst = before.type, after.type
    if dst in TEXTUAL:
        return as_text(col, src)
    kind = column_type(dst)
    if src in TEXTUAL:
        cast = kind.csv_cast(col) if dst == "boolean" else f"trim({col})::{kind.pg_name}"
        guard = kind.csv_suspicious(col)
        if guard is None:
            return cast
        return f"(CASE WHEN {guard} THEN {_refused(col, kind.pg_name)} ELSE {cast} END)"
    if (src, dst) == ("numeric", "integer"):  # a bare cast would round 1.5 to 2
        return (f"(CASE WHEN {col} <> trunc({col}) THEN {_refused(f'{col}::text', 'bigint')} "
                f"ELSE {col}::bigint END)")
    if (src, dst) == ("date", "timestamp"):
        return f"({col}::timestamp AT TIME ZONE 'UTC')"
    if (src, dst) == ("timestamp", "date"):
        return f"({col} AT TIME ZONE 'UTC')::date"
    return f"{col}::{kind.pg_name}"


async def unconvertible_rows(conn: AsyncConnection, target: Sql, col: Sql, before: ColumnDef,
                             after: ColumnDef, limit: int) -> list[tuple[str, str]]:
    """`(uid, message)` of the rows (at most `limit`, by uid) whose value the conversion
    refuses, found by running `conversion_sql` itself over them."""
    expr = Sql(conversion_sql(col, before, after))
    if limit <= 0 or await _cast_error(
            conn, statement("SELECT count({expr}) FROM {target} WHERE {col} IS NOT NULL",
                            expr=expr, target=target, col=col), {}, after) is None:
        return []
    found: list[tuple[str, str]] = []
    after_uid: Any = uuid.UUID(int=0)  # before every uid
    while len(found) < limit:  # pages by uid: no cursor stays open for the ALTER that follows
        page = list((await conn.execute(statement(
            "SELECT uid FROM {target} WHERE {col} IS NOT NULL"
            " AND uid > CAST(:after AS uuid) ORDER BY uid LIMIT :limit",
            target=target, col=col), {"after": after_uid, "limit": CHECK_PAGE})).scalars())
        found += await _split(conn, target, expr, page, after, limit - len(found))
        if len(page) < CHECK_PAGE:
            break
        after_uid = page[-1]
    return found


async def _split(conn: AsyncConnection, target: Sql, expr: Sql, uids: list[Any],
                 after: ColumnDef, limit: int) -> list[tuple[str, str]]:
    """The failing rows among `uids`, by halving the set until a failing row stands alone."""
    if limit <= 0 or not uids:
        return []
    error = await _cast_error(
        conn, statement("SELECT count({expr}) FROM {target} "
                        "WHERE uid = ANY(CAST(:uids AS uuid[]))", expr=expr, target=target),
        {"uids": uids}, after)
    if error is None:
        return []
    if len(uids) == 1:
        return [(str(uids[0]), error)]
    half = len(uids) // 2
    left = await _split(conn, target, expr, uids[:half], after, limit)
    return left + await _split(conn, target, expr, uids[half:], after, limit - len(left))


async def _cast_error(conn: AsyncConnection, query: TextClause, params: dict[str, Any],
                      after: ColumnDef) -> str | None:
    """Run `query` under a savepoint: None if it succeeds, what went wrong if a value did not
    convert. Any other failure (a lock timeout, a lost connection) is raised."""
    try:
        async with conn.begin_nested():
            await conn.execute(query, params)
    except DBAPIError as exc:
        state = sqlstate(exc) or ""
        if not state.startswith("22"):
            raise
        if state in SYNTAX_STATES:
            return f"cannot be converted to {after.type}"
        return f"cannot be converted to {after.type}: {str(exc.orig).splitlines()[0]}"
    return None


async def rows_out_of_options(conn: AsyncConnection, target: Sql, col: Sql, before: ColumnDef,
                              after: ColumnDef, limit: int) -> list[str]:
    """The uids (at most `limit`) of rows whose value, converted, is none of `after`'s
    options: the same test as the column's CHECK constraint, over every row it will hold."""
    assert after.options is not None
    rows = await conn.execute(statement(
        "SELECT uid FROM {target} WHERE {converted} <> ALL(CAST(:options AS text[])) "
        "ORDER BY uid LIMIT :limit", target=target, converted=Sql(conversion_sql(col, before, after))),
        {"options": after.options, "limit": limit})
    return [str(u) for u in rows.scalars()]
