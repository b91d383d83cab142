"""An index build interrupted by a dying server leaves nothing behind once a server starts.

Callers: an operator whose server died while PostgreSQL was building an index it asked for
(simulated exactly: the build's record says `building` with a builder backend that no longer
exists, and PostgreSQL holds the invalid index a failed `CREATE INDEX CONCURRENTLY` leaves),
then a server process starting on the same database, also one whose statement timeout is
shorter than the sweep has to wait.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import asyncpg
import pytest

from authoric.tables.indexes import physical_name
from tests.api.test_table_indexes import physical
from tests.scenario import AppWorld, expect
from tests.servers import start_server
from tests.sse import db_fetch, db_value, wait_for_lock_waiter

WIDE = 60.0


def _dead_build(world: AppWorld, database_url: str) -> str:
    """A `building` record of `codes.by_code` whose builder is gone, and the invalid index its
    failed build left; the index's physical name."""
    created = world.table("codes", [{"name": "code", "type": "text"}])
    org = world.org("North")
    for _ in range(2):  # a duplicate: a unique build over it fails and leaves an invalid index
        expect(world.admin.post(f"{world.base}/tables/codes/rows",
                                json={"org": org, "code": "same"}), 201)
    app_uid = uuid.UUID(expect(world.admin.get(world.base), 200)["uid"])
    index = physical_name("codes", "by_code")
    with pytest.raises(Exception, match="could not create unique index"):
        db_fetch(database_url, f'CREATE UNIQUE INDEX CONCURRENTLY "{index}" ON '
                 f'{created["sqlName"]} (org_uid, code)')
    dead_pid = db_value(database_url, "SELECT pg_backend_pid()")  # its connection is closed
    db_fetch(database_url, "INSERT INTO authoric.table_indexes "
             "(app_uid, table_name, name, spec, state, builder_pid) "
             "VALUES ($1, 'codes', 'by_code', $2::jsonb, 'building', $3)", app_uid,
             '{"columns": ["code"], "unique": true, "kind": "btree"}', dead_pid)
    assert [(i["name"], i["valid"]) for i in physical(database_url, world, "codes")] == [
        (index, False)]
    return index


def _swept(world: AppWorld, database_url: str) -> None:
    """Wait until the invalid index is gone, then check the record says why the build failed."""
    deadline = time.monotonic() + WIDE
    while physical(database_url, world, "codes") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert physical(database_url, world, "codes") == []
    got = expect(world.admin.get(f"{world.base}/tables/codes/indexes/by_code"), 200)
    assert got["state"] == "failed", got
    assert "interrupted" in got["error"]["message"], got


def test_a_server_starting_marks_a_dead_build_failed_and_drops_its_invalid_index(
        world: AppWorld, database_url: str, data_dir: Path) -> None:
    _dead_build(world, database_url)
    starting = start_server(database_url, data_dir)
    try:
        _swept(world, database_url)
    finally:
        starting.stop()
    # Put again, the index fails for the real reason and lists the duplicates.
    expect(world.admin.put(f"{world.base}/tables/codes/indexes/by_code",
                           json={"columns": ["code"], "unique": True}), 202)
    again = world.settled_index("codes", "by_code")
    assert again["state"] == "failed" and again["error"]["code"] == "CONFLICT", again
    assert len(again["error"]["details"]["rows"]) == 2


SHORT_MS = 500  # the starting server's statement timeout
HELD_S = 2.0  # how long the sweep is kept waiting once it waits: four of those timeouts


async def test_a_server_with_a_short_statement_timeout_sweeps_even_when_it_must_wait(
        world: AppWorld, database_url: str, data_dir: Path) -> None:
    """An operator's server starting with a 500 ms statement timeout on a busy database (the
    CI's second pass ran the sweep's catalog read past it): the sweep waits, then finishes,
    and logs no error."""
    _dead_build(world, database_url)
    holder = await asyncpg.connect(database_url)
    try:
        holding = holder.transaction()
        await holding.start()
        # Writes to the index records wait for this lock; plain reads (startup's) do not.
        await holder.execute("LOCK TABLE authoric.table_indexes IN EXCLUSIVE MODE")
        starting = await asyncio.to_thread(start_server, database_url, data_dir,
                                           AUTHORIC_STATEMENT_TIMEOUT_MS=str(SHORT_MS))
        try:
            await wait_for_lock_waiter(holder, "authoric.table_indexes", "RowExclusiveLock")
            await asyncio.sleep(HELD_S)
            await holding.rollback()
            await asyncio.to_thread(_swept, world, database_url)
            assert "Traceback" not in starting.log(), starting.log()
        finally:
            starting.stop()
    finally:
        await holder.close()
