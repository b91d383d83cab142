"""CSV import stays linear in the file (issue 19, finding 1): the in-database checks are set
operations, so one bad line late in a big file is found as fast as a clean file imports.

Callers: a clerk importing 20,000 lines whose last line repeats a unique value, and the
checks' own statements, whose plans are read from PostgreSQL (rows scanned, not wall time).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import TextClause

from authoric.records.csv_import import STAGE, dangling_references_sql, repeated_in_file_sql
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server

LINES = 20_000


def _rows_scanned(plan: dict[str, Any]) -> int:
    """Rows every scan node of an EXPLAIN ANALYZE plan read (kept or filtered out), times
    the number of times the node ran."""
    node = plan
    scanned = 0
    if "Scan" in node["Node Type"]:
        scanned = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
    return scanned + sum(_rows_scanned(child) for child in node.get("Plans", []))


async def _explain(database_url: str, setup: list[str], sql: str) -> tuple[int, list[int]]:
    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            for statement in setup:
                await conn.execute(statement)
            await conn.execute(f'ANALYZE "{STAGE}"')
            lines = [r[0] for r in await conn.fetch(sql)]
            plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}"))
            return _rows_scanned(plan[0]["Plan"]), lines
    finally:
        await conn.close()


def _plain(clause: TextClause, **values: str) -> str:
    """The check's statement as plain SQL for asyncpg, its bound parameters written in."""
    sql = clause.text
    for name, value in values.items():
        sql = sql.replace(f":{name}", value)
    return sql


def _stage(extra: str = "") -> list[str]:
    return [f'CREATE TEMP TABLE "{STAGE}" (line bigint, uid uuid, code text{extra}) ON COMMIT DROP',
            f"INSERT INTO \"{STAGE}\" (line, code) SELECT g + 1, 'code-' || g "
            f"FROM generate_series(1, {LINES}) g",
            f"INSERT INTO \"{STAGE}\" (line, code) VALUES ({LINES + 2}, 'code-7')"]


def test_the_duplicate_check_reads_each_staged_line_a_bounded_number_of_times(
        database_url: str) -> None:
    scanned, lines = asyncio.run(_explain(database_url, _stage(),
                                          _plain(repeated_in_file_sql("code"), limit="100")))
    assert lines == [LINES + 2]
    # A self-join that compares each line with every earlier one reads ~LINES²/2 = 2e8 rows.
    assert scanned <= 3 * (LINES + 1), scanned


def test_the_reference_check_reads_each_staged_line_a_bounded_number_of_times(
        database_url: str) -> None:
    setup = [*_stage(", vendor uuid"),
             'CREATE TEMP TABLE targets (uid uuid PRIMARY KEY, org_uid uuid, deleted_at timestamptz)',
             f'UPDATE "{STAGE}" SET vendor = gen_random_uuid() WHERE line = {LINES + 2}']
    sql = dangling_references_sql("pg_temp", "targets", "vendor", True)
    scanned, lines = asyncio.run(_explain(database_url, setup,
                                          _plain(sql, org="NULL", limit="100")))
    assert lines == [LINES + 2]
    assert scanned <= 3 * (LINES + 1), scanned


def test_clerk_importing_20000_lines_with_a_repeat_on_the_last_learns_its_line(
        world: AppWorld) -> None:
    world.table("codes", [{"name": "code", "type": "text", "unique": True},
                          {"name": "note", "type": "text"}])
    world.role("clerk", ["codes:*"])
    clerk = world.caller(world.org("A"), ["clerk"])
    expect(clerk.post(world.rows("codes"), json={"code": "taken"}), 201)
    lines = "".join(f"c{i},{i}\n" for i in range(LINES))
    duplicate = [{"line": LINES + 2, "column": "code",
                  "message": "duplicate value for a unique column"}]
    # Every record one line: the fast path's rows name the line.
    for last in ("c7", "taken"):
        rows = expect(_import(clerk, world, f"code,note\n{lines}{last},\n"),
                      422)["error"]["details"]["rows"]
        assert rows == duplicate
    # A quoted line break: the careful path reads the file and counts physical lines.
    rows = expect(_import(clerk, world, f'code,note\n{lines}first,"two\nlines"\nc7,\n'),
                  422)["error"]["details"]["rows"]
    assert rows == [{**duplicate[0], "line": LINES + 4}]
    assert [r["code"] for r in expect(clerk.get(world.rows("codes")), 200)["items"]] == ["taken"]


def _import(caller: Caller, world: AppWorld, body: str) -> httpx.Response:
    return caller.post(f"{world.rows('codes')}/import", content=body.encode(),
                       headers={"Content-Type": "text/csv"})


@pytest.fixture(scope="module")
def hurried(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A server whose imports may run for a tenth of a second."""
    proc = start_server(database_url, tmp_path_factory.mktemp("hurried"),
                        AUTHORIC_IMPORT_TIME_BUDGET="0.1")
    yield proc
    proc.stop()


def test_an_import_past_the_time_budget_answers_503_and_writes_nothing(
        hurried: ServerProcess) -> None:
    with httpx.Client(base_url=hurried.url, timeout=60) as client:
        world = AppWorld.create(hurried, client)
        world.table("codes", [{"name": "code", "type": "text", "unique": True},
                              {"name": "note", "type": "json"}])
        world.role("clerk", ["codes:*"])
        clerk = world.caller(world.org("A"), ["clerk"])
        body = "code,note\n" + "".join(f"c{i},{i}\n" for i in range(200_000)) + "c7,\n"
        error = expect(_import(clerk, world, body), 503, "UNAVAILABLE")
        assert "0.1" in error["error"]["message"]
        assert expect(clerk.get(world.rows("codes")), 200)["items"] == []
        # The connection it used serves the next request.
        expect(clerk.post(world.rows("codes"), json={"code": "after"}), 201)
