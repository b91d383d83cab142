"""When the relay reads the change log (changes/relay.py): only for a process that has a
stream open, and then only for what the sequencer's NOTIFYs did not carry.

In process, on a real PostgreSQL: entries are written and stamped the way writers and the
sequencer do (the sequencer's NOTIFY names the head it stamped, and carries the entries when
they fit). A relay whose hub has no subscriber follows those heads without reading the
entries; once a stream registers, every entry stamped after it reaches the hub, never
skipped: as the NOTIFY carried it, or read from the log.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence

import asyncpg
import pytest

from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.changes import reader
from authoric.changes.relay import LINGER, Relay, carried
from authoric.changes.sequencer import CHANNEL, PAYLOAD_LIMIT, Sequencer
from authoric.db.engine import create_engine, libpq_url
from authoric.realtime.hub import Hub, Subscriber
from authoric.realtime.source import Change
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


async def announced(url: str, conn: asyncpg.Connection, count: int, old_row: str | None,
                    ) -> tuple[str, int, int]:
    """Write `count` deletes with `old_row` (None: inserts), stamp them; the NOTIFY's payload,
    and the heads before and after."""
    before = await reader.head(conn)
    payloads: asyncio.Queue[str] = asyncio.Queue()
    listener = await asyncpg.connect(url)
    try:
        await listener.add_listener(CHANNEL, lambda *args: payloads.put_nowait(args[3]))
        await conn.executemany(
            "INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid, old_row) "
            "VALUES ($1, 'notes', $2, $3, $4, $5::jsonb)",
            [(APP, "insert" if old_row is None else "delete", uuid.uuid4(), ORG, old_row)
             for _ in range(count)])
        await Sequencer.stamp(conn)
        payload = await asyncio.wait_for(payloads.get(), WIDE)
    finally:
        await listener.close()
    return payload, before, await reader.head(conn)


async def test_the_sequencers_notify_carries_exactly_what_a_log_read_would_give_the_relay(
        own_database: tuple[str, str]) -> None:  # noqa: F811
    url = libpq_url(own_database[0])
    conn = await asyncpg.connect(url)
    try:
        payload, before, head = await announced(url, conn, 3, '{"title": "gone", "n": 1.5}')
        note = carried(payload)
        assert note is not None
        assert (note.after, note.head) == (before, head)
        assert list(note.entries) == await reader.changes_after(conn, before, 100)
        assert note.entries[0].old_row == {"title": "gone", "n": 1.5}
    finally:
        await conn.close()


async def test_a_batch_too_long_to_carry_is_announced_by_its_head_alone(
        own_database: tuple[str, str]) -> None:  # noqa: F811
    url = libpq_url(own_database[0])
    conn = await asyncpg.connect(url)
    try:
        image = '{"body": "%s"}' % ("x" * (PAYLOAD_LIMIT // 4))
        payload, _, head = await announced(url, conn, 5, image)
        assert payload == str(head)
        assert carried(payload) is None
    finally:
        await conn.close()


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


class Streams:
    """A sink with a stream open, which keeps what it was handed: the relay's side of the
    source seam (realtime/source.py), without judging."""

    def __init__(self) -> None:
        self.positions: list[int] = []
        self.changes: list[Change] = []
        self.batches: list[tuple[int, list[int]]] = []  # each batch's `after` and positions

    def empty(self) -> bool:
        return False

    async def dispatch(self, changes: Sequence[Change], read_at: float, after: int = -1) -> None:
        self.batches.append((after, [c.pos for c in changes]))
        self.positions.extend(c.pos for c in changes)
        self.changes.extend(changes)

    async def policy_changed(self, app_uids: set[uuid.UUID] | None) -> None:
        pass  # no streams to re-read


@pytest.fixture
async def streaming(own_database: tuple[str, str]) -> AsyncIterator[  # noqa: F811
        tuple[asyncpg.Connection, Streams, Relay]]:
    """A relay whose process has a stream open, past its first pass, and a writer."""
    url = libpq_url(own_database[0])
    streams = Streams()
    relay = Relay(url, streams)
    writer = await asyncpg.connect(url)
    relay.start()
    try:
        await asyncio.wait_for(relay.connected.wait(), WIDE)
        await until_first_pass(relay)
        yield writer, streams, relay
    finally:
        await relay.stop()
        await writer.close()


async def test_a_process_with_a_stream_open_fans_out_what_notifies_carried_without_reading_it(
        streaming: tuple[asyncpg.Connection, Streams, Relay]) -> None:
    writer, streams, relay = streaming
    start = relay.position
    reads_before, started = relay.reads, time.monotonic()
    for _ in range(5):
        await reaches(relay, await write_and_stamp(writer, 3))
    polls = 1 + int(time.monotonic() - started)  # the once-a-second read still happens
    assert relay.reads - reads_before <= polls
    assert relay.carries >= 5 - polls
    assert streams.positions == [c.pos for c in await reader.changes_after(writer, start, 100)]
    assert len(streams.positions) == 15


async def test_each_batch_the_relay_hands_on_says_it_follows_on_from_the_one_before(
        streaming: tuple[asyncpg.Connection, Streams, Relay]) -> None:
    # The webhooks take a caught-up pass's changes from these batches instead of the log
    # (webhooks/handed.py): sound only if each batch's `after` is where the one before ended.
    writer, streams, relay = streaming
    start, first = relay.position, len(streams.batches)
    for size in (1, 3, 2, 5):
        await reaches(relay, await write_and_stamp(writer, size))
    batches = streams.batches[first:]
    assert [after for after, _ in batches] == [start] + [b[-1] for _, b in batches[:-1]]
    logged = [c.pos for c in await reader.changes_after(writer, start, 100)]
    assert [p for _, b in batches for p in b] == logged and len(logged) == 11


async def test_a_lone_notify_fanned_out_as_carried_is_followed_by_no_read_of_the_log(
        streaming: tuple[asyncpg.Connection, Streams, Relay]) -> None:
    # Each write here is alone: no NOTIFY follows it within the relay's linger. The pass it
    # wakes fans out what it carried, and the relay then waits for the next NOTIFY or its
    # once-a-second poll, not a linger and a log read for nothing.
    writer, streams, relay = streaming
    reads_before, started = relay.reads, time.monotonic()
    for _ in range(5):
        await reaches(relay, await write_and_stamp(writer, 1))
        await asyncio.sleep(4 * LINGER)  # past the linger: a read after it would be done
    polls = 1 + int(time.monotonic() - started)
    assert relay.reads - reads_before <= polls
    assert len(streams.positions) == 5


async def kept_listener_through_steady_writes(relay: Relay, writer: asyncpg.Connection) -> bool:
    """Entries stamped and announced back to back for three idle bounds: whether the relay
    kept its listener connection all along."""
    await asyncio.wait_for(relay.connected.wait(), WIDE)
    await until_first_pass(relay)
    listener = relay.conn
    until = time.monotonic() + 3 * IDLE
    while time.monotonic() < until:
        await reaches(relay, await write_and_stamp(writer, 1))
        await asyncio.sleep(0.01)
    return listener is not None and relay.conn is listener and not listener.is_closed()


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
        assert await kept_listener_through_steady_writes(relay, writer)
        assert relay.skips >= 10
    finally:
        await relay.stop()
        await writer.close()
        await engine.dispose()


async def test_a_process_with_a_stream_open_keeps_its_listener_while_notifies_carry_every_entry(
        own_database: tuple[str, str]) -> None:  # noqa: F811
    """Carried entries send nothing on the listener connection either: the relay still reads
    once a second, or PostgreSQL would end it at the idle bound."""
    url = libpq_url(own_database[0])
    streams = Streams()
    relay = Relay(url, streams, idle_limit=IDLE)
    writer = await asyncpg.connect(url)
    relay.start()
    try:
        assert await kept_listener_through_steady_writes(relay, writer)
        assert relay.carries >= 10
        assert streams.positions == sorted(set(streams.positions))
    finally:
        await relay.stop()
        await writer.close()


@pytest.fixture
async def other_role(own_database: tuple[str, str]) -> AsyncIterator[  # noqa: F811
        asyncpg.Connection]:
    """A connection to the database as a role of its own that may connect and nothing more:
    a service writing captured tables under its own role, say. Anyone who may connect may
    NOTIFY on any channel (PostgreSQL checks no privilege for it)."""
    url = libpq_url(own_database[0])
    admin = await asyncpg.connect(url)
    role = f"other_{uuid.uuid4().hex[:10]}"
    await admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'other'")
    try:
        conn = await asyncpg.connect(url, user=role, password="other")
        try:
            yield conn
        finally:
            await conn.close()
    finally:
        await admin.execute(f"DROP ROLE {role}")
        await admin.close()


def forged(after: int, head: int) -> str:
    """A NOTIFY shaped as the sequencer's: one entry at `after + 1`, announcing `head`."""
    entry = [after + 1, str(APP), "notes", "insert", str(uuid.uuid4()), str(ORG), None,
             time.time(), 1]
    return json.dumps({"after": after, "head": head, "entries": [entry]})


async def test_a_notify_sent_by_another_role_delivers_nothing_and_hides_no_entry(
        streaming: tuple[asyncpg.Connection, Streams, Relay],
        other_role: asyncpg.Connection) -> None:
    writer, streams, relay = streaming
    start = relay.position
    await other_role.execute("SELECT pg_notify($1, $2)", CHANNEL, forged(start, start + 1000))
    head = await write_and_stamp(writer, 2)
    await reaches(relay, head)
    # The forged entry claims the first position: only what the log holds may arrive.
    assert streams.changes == await reader.changes_after(writer, start, 100)
    assert streams.positions == [start + 1, start + 2] and relay.position == head


async def test_a_head_announced_by_another_role_is_not_skipped_to_by_a_process_with_no_stream(
        running: tuple[asyncpg.Connection, Hub, Relay], other_role: asyncpg.Connection) -> None:
    writer, hub, relay = running
    assert hub.empty()
    await until_first_pass(relay)
    await other_role.execute("SELECT pg_notify($1, $2)", CHANNEL, str(relay.position + 10**6))
    head = await write_and_stamp(writer, 1)
    await reaches(relay, head)
    assert relay.position == head  # not the forged head, past which every entry would be lost
