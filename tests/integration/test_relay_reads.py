"""The relay reads the change log only for a process that has a stream open (changes/relay.py).

In process, on a real PostgreSQL: entries are written and stamped the way writers and the
sequencer do (the sequencer's NOTIFY names the head it stamped). A relay whose hub has no
subscriber follows those heads without reading the entries; once a stream registers, every
entry stamped after it is read for the hub, never skipped.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.changes import reader
from authoric.changes.relay import Relay
from authoric.changes.sequencer import Sequencer
from authoric.db.engine import create_engine, libpq_url
from authoric.policy.enforcer import build_enforcer
from authoric.realtime.hub import Hub, Subscriber
from authoric.settings import Settings
from tests.api.test_health import own_database  # noqa: F401  (fixture: a database of our own)

WIDE = 60.0
IDLE = 4.0  # seconds: the idle bound injected into the relay (production: 20)
APP = uuid.uuid4()  # the log has no foreign key to apps: entries of an app nobody opened
ORG = uuid.uuid4()


async def write_and_stamp(conn: asyncpg.Connection, count: int) -> int:
    """`count` committed entries, stamped and announced as the sequencer does; the new head."""
    for _ in range(count):
        await conn.execute(
            "INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid) "
            "VALUES ($1, 'notes', 'insert', $2, $3)", APP, uuid.uuid4(), ORG)
    await Sequencer.stamp(conn)
    return await reader.head(conn)


async def reaches(relay: Relay, head: int) -> None:
    deadline = time.monotonic() + WIDE
    while relay.position < head:
        assert time.monotonic() < deadline, f"the relay stayed at {relay.position} < {head}"
        await asyncio.sleep(0.01)


async def until_first_pass(relay: Relay) -> None:
    deadline = time.monotonic() + WIDE
    while relay.reads < 1:
        assert time.monotonic() < deadline, "the relay never made its first pass"
        await asyncio.sleep(0.01)


@pytest.fixture
async def running(own_database: tuple[str, str]) -> AsyncIterator[  # noqa: F811
        tuple[asyncpg.Connection, Hub, Relay]]:
    url = libpq_url(own_database[0])
    engine = create_engine(Settings(), own_database[0])
    hub = Hub(engine, SnapshotCache())
    relay = Relay(url, hub)
    writer = await asyncpg.connect(url)
    relay.start()
    try:
        await asyncio.wait_for(relay.connected.wait(), WIDE)
        yield writer, hub, relay
    finally:
        await relay.stop()
        await writer.close()
        await engine.dispose()


async def test_a_process_with_no_stream_open_follows_the_log_without_reading_it(
        running: tuple[asyncpg.Connection, Hub, Relay]) -> None:
    writer, hub, relay = running
    assert hub.empty()
    # The relay's first pass reads once at start; measure from after it, or that read and a
    # safety poll inside the first second would count as two.
    await until_first_pass(relay)
    reads_before, started = relay.reads, time.monotonic()
    for _ in range(5):
        await reaches(relay, await write_and_stamp(writer, 3))
    # The safety poll may read once a second; five stamped batches, each read, would be
    # more than those polls unless the machine took seconds over them.
    polls = 1 + int(time.monotonic() - started)
    assert relay.reads - reads_before <= polls
    assert relay.skips >= 1
    assert relay.position == await reader.head(writer)


async def test_a_process_with_a_stream_open_reads_every_entry_stamped_after_it_registered(
        running: tuple[asyncpg.Connection, Hub, Relay]) -> None:
    writer, hub, relay = running
    await reaches(relay, await write_and_stamp(writer, 2))  # skipped: nobody was here
    snapshot = AppSnapshot(APP, "notes-app", 1, {}, {}, {}, build_enforcer({}))
    sub = Subscriber(APP, ("notes",), None, 100)
    hub.add(sub, snapshot)
    skips_before = relay.skips
    await reaches(relay, await write_and_stamp(writer, 2))
    assert relay.skips == skips_before  # read for the stream, never skipped
    hub.remove(sub)
    assert hub.empty()


async def test_a_process_with_no_stream_open_keeps_its_listener_through_a_steady_write_load(
        own_database: tuple[str, str]) -> None:  # noqa: F811
    """Following announced heads sends nothing on the listener connection, and PostgreSQL
    ends a dedicated backend whose client stays silent past the idle bound (db/dedicated.py):
    under steady writes the relay would be cut off and reconnect every idle bound."""
    url = libpq_url(own_database[0])
    engine = create_engine(Settings(), own_database[0])
    relay = Relay(url, Hub(engine, SnapshotCache()), idle_limit=IDLE)
    writer = await asyncpg.connect(url)
    relay.start()
    try:
        await asyncio.wait_for(relay.connected.wait(), WIDE)
        await until_first_pass(relay)
        listener = relay.conn
        until = time.monotonic() + 3 * IDLE
        while time.monotonic() < until:  # batches stamped and announced back to back
            await reaches(relay, await write_and_stamp(writer, 1))
            await asyncio.sleep(0.01)
        assert relay.skips >= 10
        assert listener is not None and relay.conn is listener and not listener.is_closed()
    finally:
        await relay.stop()
        await writer.close()
        await engine.dispose()
