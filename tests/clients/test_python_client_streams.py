"""Streams and live queries through the Python client, when things go wrong: a server killed
and restarted while a writer writes, a 429 for one stream too many, bulk changes, and a live
query kept equal to a fresh list through a mix of writes."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from authoric_client import AuthoricError, Backoff, Client, Event, LiveQuery, Subscription
from tests.clients.python_client_world import Shop, shop
from tests.scenario import AppWorld
from tests.servers import ServerProcess, free_port, start_server
from tests.waiting import wait_until

FAST = Backoff(initial=0.05, maximum=1.0)  # reconnect soon after the restart: a shorter test
# One stream per user, whose lease lapses LEASE_TTL s after the last renewal: a stream killed
# with its server holds its user's one slot until then, and the 429 says so.
LIMITS = {"AUTHORIC_SSE_MAX_STREAMS_PER_USER": "1", "AUTHORIC_SSE_LEASE_TTL": "6"}
LEASE_TTL = 6.0


@dataclass
class Restartable:
    database_url: str
    data: Path
    port: int
    proc: ServerProcess
    http: httpx.Client  # the admin's; the port stays the same across restarts

    @property
    def url(self) -> str:
        return self.proc.url

    def kill_and_restart(self) -> None:
        self.proc.stop(signal.SIGKILL)  # no graceful end: streams just drop
        self.proc = start_server(self.database_url, self.data, port=self.port, **LIMITS)


@pytest.fixture(scope="module")
def restartable(database_url: str, tmp_path_factory: pytest.TempPathFactory,
                ) -> Iterator[Restartable]:
    data = tmp_path_factory.mktemp("client-restart")
    port = free_port()
    proc = start_server(database_url, data, port=port, **LIMITS)
    with httpx.Client(base_url=proc.url, timeout=30) as http:
        server = Restartable(database_url, data, port, proc, http)
        yield server
        server.proc.stop()


def _app(server: Restartable) -> Shop:
    return shop(AppWorld.create(server.proc, server.http))


def _signed_in(url: str, acme: Shop, who: tuple[str, str] | None = None) -> Client:
    client = Client(url, acme.world.name, backoff=FAST)
    email, password = who or acme.member()
    client.auth.sign_in(email, password)
    return client


def _collect(sub: Subscription[Any], into: list[Event[Any]]) -> bool:
    """Take what has arrived (waiting at most a moment); True to keep `wait_until` polling."""
    with contextlib.suppress(TimeoutError):
        into.append(sub.next(0.5))
    return True


def test_a_server_killed_and_restarted_while_a_writer_writes_loses_and_repeats_nothing(
        restartable: Restartable) -> None:
    acme = _app(restartable)
    url = restartable.url
    with _signed_in(url, acme) as db, _signed_in(url, acme) as writer, \
            _signed_in(url, acme) as watcher, db.table("invoices").subscribe() as sub:
        assert sub.next(60).op == "connected"
        live = watcher.table("invoices").live_query(order="-createdAt", limit=10)
        acked: list[str] = []
        stop = threading.Event()

        def write() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    acked.append(writer.table("invoices").create({"number": f"K-{n}", "seq": n})["uid"])
                except (httpx.TransportError, AuthoricError):
                    stop.wait(0.05)  # not acknowledged: it may or may not have been written

        thread = threading.Thread(target=write)
        thread.start()
        try:
            wait_until(lambda: len(acked) >= 20, "writes before the kill")
            restartable.kill_and_restart()
            after = len(acked)
            wait_until(lambda: len(acked) >= after + 20, "writes after the restart")
        finally:
            stop.set()
            thread.join(60)
        heard: list[Event[Any]] = []
        inserted = lambda: {e.row["uid"] for e in heard if e.op == "insert" and e.row}  # noqa: E731
        wait_until(lambda: _collect(sub, heard) and set(acked) <= inserted(), "every acknowledged write")
        ids = [int(e.id) for e in heard if e.id is not None]
        assert ids == sorted(ids) and len(ids) == len(set(ids)), "in id order, never twice"
        uids = [e.row["uid"] for e in heard if e.op == "insert" and e.row]
        assert len(uids) == len(set(uids))
        assert sub.connections >= 2 and sub.status == "live"
        fresh = lambda: watcher.table("invoices").list(order="-createdAt", limit=10).items  # noqa: E731
        wait_until(lambda: live.rows == fresh(), "the live query to match a fresh list")
        live.close()


def test_one_stream_too_many_waits_as_429_retry_after_says(restartable: Restartable) -> None:
    acme = _app(restartable)
    who = acme.member()
    with _signed_in(restartable.url, acme, who) as first, \
            _signed_in(restartable.url, acme, who) as second, first.table("invoices").subscribe() as open_one:
        assert open_one.next(60).op == "connected"
        with second.table("invoices").subscribe() as refused:
            wait_until(lambda: refused.retry_after is not None, "the 429")
            # The server's Retry-After (when the open stream's lease could lapse), not the
            # client's own backoff, which never waits more than FAST.maximum.
            assert refused.retry_after is not None
            assert FAST.maximum < refused.retry_after <= LEASE_TTL
            assert refused.status == "reconnecting" and refused.connections == 0


@pytest.fixture
def acme(server: ServerProcess, world: AppWorld) -> Shop:
    return shop(world)


def _fresh(client: Client, query: dict[str, Any]) -> list[Any]:
    """What a fresh list of `query` returns (every page when it has no limit)."""
    table = client.table("invoices")
    if "limit" in query:
        return table.list(**query).items
    rows: list[Any] = []
    after = None
    while True:
        page = table.list(**query, limit=1000, after=after)
        rows += page.items
        if page.next is None:
            return rows
        after = page.next


def _converged(client: Client, live: LiveQuery[Any], query: dict[str, Any]) -> None:
    wait_until(lambda: live.rows == _fresh(client, query), f"live query {query} to converge")


def test_live_queries_converge_to_a_fresh_list_after_a_mix_of_writes(
        server: ServerProcess, acme: Shop) -> None:
    followed = {"filter": {"seq": {"gte": 3}}, "order": "seq"}  # decided event by event
    window = {"filter": {"status": "open"}, "order": "-createdAt", "limit": 5}
    refetched = {"filter": {"number": {"like": "L-1%"}}, "order": "number", "limit": 4}
    with _signed_in(server.url, acme) as db:
        invoices = db.table("invoices")
        lives = {name: invoices.live_query(**query) for name, query in
                 (("followed", followed), ("window", window), ("refetched", refetched))}
        rows = [invoices.create({"number": f"L-{i}", "seq": i % 7,
                                 "status": "open" if i % 2 else "closed"}) for i in range(16)]
        for row in rows[:6]:
            invoices.update(row["uid"], {"status": "closed" if row["status"] == "open" else "open",
                                         "seq": row["seq"] + 3})
        for row in rows[10:13]:
            invoices.delete(row["uid"])
        invoices.import_csv("number,seq,status\nL-100,9,open\nL-101,1,open\n")
        for name, query in (("followed", followed), ("window", window), ("refetched", refetched)):
            _converged(db, lives[name], query)
        assert lives["followed"].loads == 1, "followed event by event, never reloaded"
        assert lives["refetched"].loads > 1, "a `like` filter and a text order reload"
        assert invoices.update_where({"status": "open"}, {"seq": 42}) > 0
        for name, query in (("followed", followed), ("window", window), ("refetched", refetched)):
            _converged(db, lives[name], query)
        assert lives["followed"].loads == 2, "the bulk change's resync reloaded it"
        assert [r["seq"] for r in lives["followed"].rows][-1] == 42
        for live in lives.values():
            live.close()


def test_live_queries_ordered_by_a_decimal_and_by_a_date_follow_every_write_without_reloading(
        server: ServerProcess, acme: Shop) -> None:
    """The client reads the columns' kinds from the app's OpenAPI document, so it orders
    `"9.99"` before `"10.5"` and compares dates as dates: every write is applied where it
    lands, and the rows still equal a fresh list."""
    by_amount = {"filter": {"amount": {"gte": "10"}}, "order": "-amount"}
    by_due = {"filter": {"due": {"lt": "2027-01-01"}}, "order": "due", "limit": 4}
    with _signed_in(server.url, acme) as db:
        invoices = db.table("invoices")
        lives = {"amount": invoices.live_query(**by_amount), "due": invoices.live_query(**by_due)}
        made = {}
        for number, amount, due in (("D-1", "9.99", "2026-03-01"), ("D-2", "10", "2026-12-31"),
                                    ("D-3", "100.5", "2026-01-15"), ("D-4", "25.25", "2027-02-01"),
                                    ("D-5", "10.50", None), ("D-6", None, "2025-12-31")):
            made[number] = invoices.create({"number": number, "amount": amount, "due": due})
        invoices.update(made["D-3"]["uid"], {"amount": "5"})  # leaves the amount query
        invoices.update(made["D-1"]["uid"], {"amount": "1000.0"})  # enters it, first
        invoices.update(made["D-2"]["uid"], {"due": "2025-01-01"})  # moves to the front by due
        invoices.delete(made["D-4"]["uid"])
        invoices.create({"number": "D-7", "amount": "12", "due": "2026-06-01"})  # past the window
        for name, query in (("amount", by_amount), ("due", by_due)):
            _converged(db, lives[name], query)
        assert [r["number"] for r in lives["amount"].rows] == ["D-1", "D-7", "D-5", "D-2"]
        assert [r["number"] for r in lives["due"].rows] == ["D-2", "D-6", "D-3", "D-1"]
        assert (lives["amount"].loads, lives["due"].loads) == (1, 1), "no write needed a reload"
        for live in lives.values():
            live.close()


def test_a_live_query_with_expand_holds_each_row_with_its_referenced_row_as_a_list_would(
        server: ServerProcess, acme: Shop) -> None:
    query = {"order": "seq", "expand": ["vendor"]}
    with _signed_in(server.url, acme) as db:
        vendor = db.table("vendors").create({"name": "Acme"})
        invoices = db.table("invoices")
        live = invoices.live_query(**query)
        first = invoices.create({"number": "X-1", "seq": 1, "vendor_uid": vendor["uid"]})
        invoices.create({"number": "X-2", "seq": 2})
        invoices.update(first["uid"], {"seq": 3})
        _converged(db, live, query)
        assert [(r["number"], r["expand"]["vendor"]) for r in live.rows] == [
            ("X-2", None), ("X-1", vendor)]
        live.close()
