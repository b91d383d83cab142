"""Each type's CSV check against real PostgreSQL: a cell the fast import path lets PostgreSQL cast
either gets the value our own text parser gives, or is flagged for the careful path. A cell our
parser refuses never slips through the fast path."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import pytest

from authoric.catalog.types import MAX_JSON_DEPTH, BadValue, column_type, parse_text

CELLS: dict[str, list[str]] = {
    "text": ["plain", " padded ", "ünï ☃", "x" * 500],
    "integer": ["42", " 42 ", "-7", "4.5", "1e3", "ten", "9223372036854775807",
                "9223372036854775808", "+5", "0x10", "0o7", "0b1", "1_000", " -0 "],
    "numeric": ["8760.00", " 1.5 ", "1e3", "NaN", "nan", "Infinity", "-inf", "ten", "0x10",
                "1_000.5", ".5", "5.", "-1.5E-3", "1e200000"],
    "boolean": ["true", "TRUE", " yes ", "1", "t", "y", "false", "0", "no", "f", "n", "on", "off",
                "of", "maybe"],
    "timestamp": ["2026-01-31T12:00:00Z", "2026-01-31 12:00:00+02", "2026-01-31T12:00:00+02:00",
                  "2026-01-31T12:00:00", "2026-01-31", "Jan 31 2026", "now", "epoch",
                  "2026-01-31T12:00:00 PST", "9999-12-31T23:59:59-12:00",
                  "0001-01-01T00:00:00+01:00", "9999-12-31T00:00:00Z"],
    "date": ["2026-01-31", " 2026-01-31 ", "2026/01/31", "Jan 31 2026", "20260131", "today",
             "2026-02-30"],
    "uuid": ["0199a0c2-0000-7000-8000-000000000001", "{0199a0c2-0000-7000-8000-000000000001}",
             "0199a0c200007000800000000000000 1", "0199a0c2000070008000000000000001", "zzz"],
    "json": ['{"a": [1, 2]}', "3", '"s"', "null", "{not json", "[" * (MAX_JSON_DEPTH + 1)
             + "]" * (MAX_JSON_DEPTH + 1), "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH],
    "reference": ["0199a0c2-0000-7000-8000-000000000001", "zzz"],
}


UNREADABLE = "a value PostgreSQL stores that the driver cannot read back"


async def _fast_path_verdict(conn: asyncpg.Connection, name: str, cell: str) -> tuple[bool, Any]:
    """(flagged for the careful path, PostgreSQL's cast value or an exception)."""
    kind = column_type(name)
    ref = 's."c"'
    rule = kind.csv_suspicious(ref) or "false"
    source = '(SELECT $1::text AS "c") s'
    flagged = bool(await conn.fetchval(f"SELECT ({rule}) FROM {source}", cell))
    try:
        value: Any = await conn.fetchval(f"SELECT {kind.csv_cast(ref)} FROM {source}", cell)
    except asyncpg.PostgresError as exc:
        value = exc
    except OverflowError:  # PostgreSQL took it, but no answer could carry it back
        value = UNREADABLE
    return flagged, value


async def _verdicts(url: str) -> list[tuple[str, str, bool, Any]]:
    conn = await asyncpg.connect(url)
    try:
        return [(name, cell, *await _fast_path_verdict(conn, name, cell))
                for name, cells in CELLS.items() for cell in cells]
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def verdicts(database_url: str) -> list[tuple[str, str, bool, Any]]:
    return asyncio.run(_verdicts(database_url))


def test_a_cell_postgresql_casts_unflagged_gets_exactly_the_value_our_parser_gives(
        verdicts: list[tuple[str, str, bool, Any]]) -> None:
    for name, cell, flagged, value in verdicts:
        if flagged or isinstance(value, Exception):
            continue
        try:
            ours = parse_text(name, cell)
        except BadValue:
            pytest.fail(f"{name} {cell!r}: the fast path would import {value!r}, "
                        "which our parser refuses")
        theirs = json.loads(value) if name == "json" else value
        assert theirs == ours, (name, cell)


def test_every_cell_our_parser_refuses_is_refused_or_flagged_by_the_fast_path(
        verdicts: list[tuple[str, str, bool, Any]]) -> None:
    refused = 0
    for name, cell, flagged, value in verdicts:
        try:
            parse_text(name, cell)
        except BadValue:
            refused += 1
            assert flagged or isinstance(value, Exception), (name, cell, value)
    assert refused >= 20  # the cells above exercise refusals of every type but text
