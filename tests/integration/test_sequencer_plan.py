"""The sequencer's stamping plan (changes/sequencer.py), on a real PostgreSQL.

The statement joins the few rows it stamps to the log by key. The planner's guess of how
many rows are unstamped comes from the last ANALYZE; one that caught a burst makes it join
by a merge or a hash over the whole log, on every pass, a cost that grows with the log. The
caller is the sequencer, on its own connection's settings, after such an ANALYZE.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg

from authoric.changes.sequencer import STAMP, Sequencer
from authoric.db.engine import libpq_url
from authoric.settings import Settings
from tests.api.test_health import own_database  # noqa: F401  (fixture: a database of our own)

BURST = 20_000


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", ()) for n in nodes(child))]


async def test_the_sequencer_stamps_a_few_rows_by_key_after_statistics_caught_a_burst(
        own_database: tuple[str, str]) -> None:  # noqa: F811
    url = libpq_url(own_database[0])
    setup = await asyncpg.connect(url)
    try:
        await setup.execute(
            "INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid) "
            "SELECT $1, 'notes', 'insert', gen_random_uuid(), $2 FROM generate_series(1, $3)",
            uuid.uuid4(), uuid.uuid4(), BURST)
        await setup.execute("ANALYZE authoric.changes")  # the burst, all of it unstamped
        await setup.execute("UPDATE authoric.changes SET pos = nextval('authoric.change_pos')")
        await setup.execute(
            "INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid) "
            "SELECT $1, 'notes', 'insert', gen_random_uuid(), $2 FROM generate_series(1, 3)",
            uuid.uuid4(), uuid.uuid4())
    finally:
        await setup.close()
    sequencer = Sequencer(Settings(), url)
    conn = await asyncpg.connect(url, server_settings=sequencer.server_settings())
    stamping = conn.transaction()
    await stamping.start()
    try:
        explained = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {STAMP}")
    finally:
        await stamping.rollback()  # EXPLAIN ANALYZE ran the UPDATE: nothing of it stays
        await conn.close()
    plan = json.loads(explained)[0]
    types = [node["Node Type"] for node in nodes(plan["Plan"])]
    [update] = [node for node in nodes(plan["Plan"]) if node["Node Type"] == "ModifyTable"]
    assert update["Actual Rows"] == 3
    assert "Nested Loop" in types and "Merge Join" not in types and "Hash Join" not in types
