"""Which changes a process's hub takes up (realtime/hub.py): only those a stream here may
receive. A change of an org no stream here follows costs nothing, not even a connection.
The hub here has a database that cannot be reached (nothing listens on its port), so taking
a change up ends its streams with `error`, and leaving it alone leaves them open."""

from __future__ import annotations

import asyncio
import uuid

from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.db.engine import create_engine
from authoric.policy.principal import Principal
from authoric.realtime.hub import Hub, Subscriber
from authoric.realtime.source import Change
from authoric.settings import Settings

APP, HERE, ELSEWHERE = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def hub_with(*subscribers: Subscriber) -> Hub:
    hub = Hub(create_engine(Settings(), "postgresql://postgres@127.0.0.1:1/none"), SnapshotCache())
    snapshot = AppSnapshot(APP, "notes-app", 1, {}, {}, {}, build_enforcer({}))
    for sub in subscribers:
        hub.add(sub, snapshot)
    return hub


def member_of(org: uuid.UUID) -> Subscriber:
    return Subscriber(APP, ("notes",), Principal(APP, uuid.uuid4(), org, None, ("reader",)), 100)


def change_in(org: uuid.UUID, table: str = "notes") -> Change:
    return Change(7, APP, table, "insert", uuid.uuid4(), org, None)


def test_a_change_in_an_org_no_stream_here_follows_is_left_alone() -> None:
    sub = member_of(HERE)
    asyncio.run(hub_with(sub).dispatch([change_in(ELSEWHERE), change_in(HERE, "other")]))
    assert not sub.closed and sub.take() is None


def test_a_change_in_the_org_of_a_stream_here_is_taken_up() -> None:
    sub = member_of(HERE)
    asyncio.run(hub_with(sub, member_of(ELSEWHERE)).dispatch([change_in(HERE)]))
    assert (sub.closed, sub.reason) == (True, "error")  # it went for the database


def test_the_operators_feed_takes_up_a_change_of_every_org() -> None:
    operator = Subscriber(APP, ("notes",), None, 100)
    asyncio.run(hub_with(operator, member_of(HERE)).dispatch([change_in(ELSEWHERE)]))
    assert (operator.closed, operator.reason) == (True, "error")
