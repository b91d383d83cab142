"""Which entries a relay fans out as the sequencer's NOTIFYs carried them, and when it reads
the log instead (changes/relay.py): the bookkeeping alone, no database."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from authoric.catalog.snapshot import SnapshotCache
from authoric.changes.relay import Carried, Relay
from authoric.changes.sequencer import CHANNEL
from authoric.db.engine import create_engine
from authoric.realtime.hub import Hub
from authoric.realtime.source import Change
from authoric.settings import Settings

APP, ORG = uuid.uuid4(), uuid.uuid4()


def carrying(after: int, head: int) -> Carried:
    return Carried(after, head, [change(pos) for pos in range(after + 1, head + 1)])


def change(pos: int) -> Change:
    return Change(pos, APP, "notes", "insert", uuid.uuid4(), ORG, None)


def relay_at(position: int, notes: list[Carried], announced: int | None = None) -> Relay:
    relay = Relay("postgresql://nowhere", Hub(create_engine(Settings(), "postgresql://nowhere"),
                                              SnapshotCache()))
    relay.position, relay._carried = position, notes
    relay.announced = (notes[-1].head if notes else position) if announced is None else announced
    return relay


def test_a_relay_takes_carried_entries_that_follow_on_from_its_position() -> None:
    relay = relay_at(10, [carrying(8, 10), carrying(10, 12), carrying(12, 15)])
    taken = relay._take_carried()
    assert taken is not None and [c.pos for c in taken] == [11, 12, 13, 14, 15]


def test_a_relay_reads_the_log_when_a_notify_was_missed_before_the_carried_ones() -> None:
    assert relay_at(10, [carrying(12, 15)])._take_carried() is None


def test_a_relay_reads_the_log_when_a_head_was_announced_without_its_entries() -> None:
    assert relay_at(10, [carrying(10, 12)], announced=20)._take_carried() is None


def test_a_relay_takes_at_most_a_batch_and_leaves_the_rest_for_its_next_pass() -> None:
    relay = relay_at(0, [carrying(0, 3), carrying(3, 6), carrying(6, 9)])
    relay.batch = 3
    taken = relay._take_carried()
    assert taken is not None and [c.pos for c in taken] == [1, 2, 3]
    relay.position = 3
    assert relay._more_carried()


def test_a_relay_woken_by_a_notify_it_cannot_parse_reads_the_log() -> None:
    relay = relay_at(10, [])
    relay._notified(None, 0, "authoric_changes", '{"after": 10, "head": ')
    relay._notified(None, 0, "authoric_changes", '{"after": 10}')
    assert relay._wake.is_set() and relay._take_carried() is None
    assert relay._heads == {} and relay.announced == 10  # nothing announced either


def payload(after: int, head: int) -> str:
    entries = [[pos, str(APP), "notes", "insert", str(uuid.uuid4()), str(ORG), None, 0.0, 1]
               for pos in range(after + 1, head + 1)]
    return json.dumps({"after": after, "head": head, "entries": entries})


def test_a_notify_counts_only_once_its_sender_is_vouched_for_as_the_relays_own_role() -> None:
    relay = relay_at(10, [])
    relay._notified(None, 42, CHANNEL, payload(10, 12))
    relay._notified(None, 42, CHANNEL, "14")
    # Heard, not yet believed: nothing announced, nothing to take until the sender is known.
    assert relay.announced == 10 and relay._heads == {42: 14}
    assert [n.sender for n in relay._carried] == [42]
    relay._vouched = {42: time.monotonic()}  # looked up a moment ago: no statement needed
    asyncio.run(relay._vouch(None))  # type: ignore[arg-type]
    assert relay.announced == 14 and relay._heads == {}
    # Its entries follow on from 10 but stop short of the announced 14: the log is read.
    assert relay._take_carried() is None


def test_a_notify_that_is_no_position_wakes_the_relay_and_announces_nothing() -> None:
    relay = relay_at(10, [])
    nested = '{"after": 10, "head": 12, "entries": ' + "[" * 5000 + "]" * 5000 + "}"
    for junk in ("²", "٣", "9" * 5000, "12 ", nested):  # digits to str.isdigit, not to us
        relay._wake.clear()
        relay._notified(None, 42, CHANNEL, junk)
        assert relay._wake.is_set(), junk[:20]
    assert relay._heads == {} and relay._carried == [] and relay.announced == 10


def test_a_relay_notes_the_apps_a_policy_notify_names_and_ignores_one_that_names_none() -> None:
    from authoric.changes.relay import POLICY_CHANNEL

    relay = relay_at(0, [])
    relay._notified(None, 1, POLICY_CHANNEL, str(APP))
    relay._notified(None, 1, POLICY_CHANNEL, "not an app")
    assert relay._policy == {APP}
