"""The subscribe feed (contract section 5) over real HTTP and real SSE.

Callers: a clerk (all of `invoices`), an auditor (amount redacted), a viewer whose row policy
hides drafts, members of another org, roles missing `read_list` or `read`, holders of
short-lived tokens, and clients resuming with `Last-Event-ID` or `?lastEventId=`.

To show that something was *not* sent, a test writes a later "fence" row the subscriber may
see and waits for it: the feed delivers in position order, so anything that was going to
arrive before the fence has arrived by then.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect, token_exp
from tests.servers import ServerProcess, TestClock, start_server
from tests.sse import (
    SSEClient,
    db_value,
    drop_database,
    fresh_database,
    log_head,
    strictly_increasing,
    terminate,
)

COLUMNS: list[dict[str, Any]] = [
    {"name": "number", "type": "text", "required": True},
    {"name": "status", "type": "text", "default": "received"},
    {"name": "amount", "type": "numeric"},
    {"name": "note", "type": "text"}]
READ = ["invoices:read_list", "invoices:read"]


@dataclass
class Feed:
    """An app with `invoices`, two orgs, the roles above, and a clerk writing in `org`."""

    world: AppWorld
    org: str
    other_org: str
    clerk: Caller
    streams: list[SSEClient] = field(default_factory=list)
    counter: int = 0

    @property
    def path(self) -> str:
        return f"{self.world.rows('invoices')}/subscribe"

    def open(self, caller: Caller, *, server: ServerProcess | None = None,
             **kw: Any) -> SSEClient:
        """Open a stream (whatever the status): closed at teardown."""
        stream = SSEClient((server or self.world.server).url, self.path, caller.token, **kw)
        self.streams.append(stream)
        return stream

    def subscribe(self, caller: Caller, **kw: Any) -> SSEClient:
        """Open a stream and wait for `connected`."""
        stream = self.open(caller, **kw)
        assert stream.status_code == 200, (stream.status_code, stream.body)
        stream.wait_connected()
        return stream

    def insert(self, caller: Caller | None = None, **values: Any) -> dict[str, Any]:
        self.counter += 1
        body = {"number": f"INV-{self.counter}", **values}
        return dict(expect((caller or self.clerk).post(self.world.rows("invoices"), json=body), 201))

    def update(self, uid: str, caller: Caller | None = None, **values: Any) -> dict[str, Any]:
        return dict(expect((caller or self.clerk).patch(
            f"{self.world.rows('invoices')}/{uid}", json=values), 200))

    def delete(self, uid: str, caller: Caller | None = None) -> None:
        expect((caller or self.clerk).delete(f"{self.world.rows('invoices')}/{uid}"), 204)

    def get(self, caller: Caller, uid: str) -> dict[str, Any]:
        return dict(expect(caller.get(f"{self.world.rows('invoices')}/{uid}"), 200))


@pytest.fixture
def feed(world: AppWorld) -> Iterator[Feed]:
    world.table("invoices", COLUMNS)
    org, other = world.org("Northwind"), world.org("Southwind")
    world.role("clerk", ["invoices:*"])
    world.role("auditor", READ, redact={"invoices": ["amount"]})
    world.role("no_drafts", READ, row_policies={"invoices": {"status": {"ne": "draft"}}})
    world.role("lister", ["invoices:read_list"])
    world.role("single_reader", ["invoices:read"])
    feed = Feed(world, org, other, world.caller(org, ["clerk"]))
    yield feed
    for stream in feed.streams:
        stream.close()


def change_keys(stream: SSEClient, after: int = 0) -> list[tuple[int, str | None, str | None]]:
    return [(f.pos, f.op, f.row_uid) for f in stream.changes() if f.pos > after]


# -- opening the stream ---------------------------------------------------------------------

def test_clerk_without_accept_event_stream_gets_406(feed: Feed) -> None:
    response = feed.clerk.get(feed.path)
    expect(response, 406, "NOT_ACCEPTABLE")
    response = feed.clerk.get(feed.path, headers={"Accept": "application/json"})
    expect(response, 406, "NOT_ACCEPTABLE")


def test_anonymous_caller_and_bad_token_get_401(feed: Feed) -> None:
    anonymous = feed.open(Caller(feed.clerk.client))
    assert anonymous.status_code == 401
    assert json.loads(anonymous.body)["error"]["code"] == "UNAUTHENTICATED"
    forged = feed.open(Caller(feed.clerk.client, "not-a-token"))
    assert forged.status_code == 401
    # authentication comes before the Accept check
    expect(Caller(feed.clerk.client).get(feed.path), 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("operation", ["list", "read"])
def test_clerk_gets_table_locked_when_list_or_read_is_switched_off(feed: Feed, operation: str) -> None:
    expect(feed.world.admin.patch(f"{feed.world.base}/tables/invoices",
                                  json={"operations": {operation: False}}), 200)
    stream = feed.open(feed.clerk)
    assert stream.status_code == 403
    assert json.loads(stream.body)["error"]["code"] == "TABLE_LOCKED"


@pytest.mark.parametrize("role", ["lister", "single_reader"])
def test_role_without_read_list_or_without_read_gets_forbidden(feed: Feed, role: str) -> None:
    caller = feed.world.caller(feed.org, [role])
    stream = feed.open(caller)
    assert stream.status_code == 403
    assert json.loads(stream.body)["error"]["code"] == "FORBIDDEN"


def test_clerk_receives_connected_first(feed: Feed) -> None:
    stream = feed.subscribe(feed.clerk)
    assert stream.headers["content-type"].startswith("text/event-stream")
    first = stream.frames[0]
    assert first.event == "connected" and first.id is None
    assert first.data == {"table": "invoices", "live": True}


# -- what each subscriber receives ----------------------------------------------------------

def test_clerk_receives_insert_update_delete_in_the_get_row_shape(feed: Feed) -> None:
    stream = feed.subscribe(feed.clerk)
    row = feed.insert(amount="10.50", note="first")
    inserted = stream.wait_for_change(row["uid"], "insert")
    assert inserted.event is None
    assert inserted.data == {"op": "insert", "table": "invoices", "row": row}
    assert inserted.data["row"] == feed.get(feed.clerk, row["uid"])

    changed = feed.update(row["uid"], status="matched")
    updated = stream.wait_for_change(row["uid"], "update")
    assert updated.data == {"op": "update", "table": "invoices", "row": changed}

    feed.delete(row["uid"])
    deleted = stream.wait_for_change(row["uid"], "delete")
    assert deleted.data == {"op": "delete", "table": "invoices", "rowUid": row["uid"]}
    assert [f.op for f in stream.changes()] == ["insert", "update", "delete"]
    assert strictly_increasing(stream.ids())


def test_auditor_receives_amount_redacted_exactly_as_a_get_shows_it(feed: Feed) -> None:
    auditor = feed.world.caller(feed.org, ["auditor"])
    stream = feed.subscribe(auditor)
    row = feed.insert(amount="99.00", note="n")
    frame = stream.wait_for_change(row["uid"], "insert")
    assert frame.data["row"]["amount"] == "[redacted]"
    assert frame.data["row"] == feed.get(auditor, row["uid"])
    assert "99.00" not in stream.text()


def test_viewer_without_drafts_never_hears_of_a_draft_nor_its_id(feed: Feed) -> None:
    viewer = feed.world.caller(feed.org, ["no_drafts"])
    everyone = feed.subscribe(feed.clerk)
    stream = feed.subscribe(viewer)
    draft = feed.insert(status="draft")
    feed.update(draft["uid"], note="still a draft")
    fence = feed.insert()
    stream.wait_for_change(fence["uid"])
    everyone.wait_for_change(fence["uid"])
    draft_ids = {f.pos for f in everyone.changes() if f.row_uid == draft["uid"]}
    assert len(draft_ids) == 2
    assert draft["uid"] not in stream.text()
    assert not draft_ids & set(stream.ids())
    assert [(f.op, f.row_uid) for f in stream.changes()] == [("insert", fence["uid"])]


def test_member_of_other_org_never_hears_of_this_orgs_rows(feed: Feed) -> None:
    outsider_clerk = feed.world.caller(feed.other_org, ["clerk"])
    stream = feed.subscribe(outsider_clerk)
    row = feed.insert()
    feed.update(row["uid"], note="x")
    feed.delete(row["uid"])
    fence = feed.insert(outsider_clerk)
    stream.wait_for_change(fence["uid"])
    assert row["uid"] not in stream.text()
    assert [(f.op, f.row_uid) for f in stream.changes()] == [("insert", fence["uid"])]


def test_delete_reaches_only_those_who_could_read_the_row_just_before(feed: Feed) -> None:
    viewer = feed.world.caller(feed.org, ["no_drafts"])
    outsider = feed.world.caller(feed.other_org, ["clerk"])
    everyone, seen_by_viewer = feed.subscribe(feed.clerk), feed.subscribe(viewer)
    outside = feed.subscribe(outsider)
    shown, draft, hidden_later = feed.insert(), feed.insert(status="draft"), feed.insert()
    seen_by_viewer.wait_for_change(hidden_later["uid"], "insert")
    feed.update(hidden_later["uid"], status="draft")  # a draft when it is deleted
    for row in (shown, draft, hidden_later):
        feed.delete(row["uid"])
    fence = feed.insert()
    for stream in (everyone, seen_by_viewer):
        stream.wait_for_change(fence["uid"])
    deletes = {r["uid"] for r in (shown, draft, hidden_later)}
    assert {f.row_uid for f in everyone.changes() if f.op == "delete"} == deletes
    assert [f.row_uid for f in seen_by_viewer.changes() if f.op == "delete"] == [shown["uid"]]
    assert draft["uid"] not in seen_by_viewer.text()
    outside_fence = feed.insert(outsider)
    outside.wait_for_change(outside_fence["uid"])
    assert [f.row_uid for f in outside.changes()] == [outside_fence["uid"]]


def test_soft_delete_sends_delete_to_the_clerk(feed: Feed) -> None:
    feed.world.table("receipts", [{"name": "number", "type": "text"}], softDelete=True)
    feed.world.role("clerk", ["invoices:*", "receipts:*"])
    stream = SSEClient(feed.world.server.url, f"{feed.world.rows('receipts')}/subscribe",
                       feed.clerk.token)
    feed.streams.append(stream)
    stream.wait_connected()
    row = expect(feed.clerk.post(feed.world.rows("receipts"), json={"number": "R-1"}), 201)
    stream.wait_for_change(row["uid"], "insert")
    expect(feed.clerk.delete(f"{feed.world.rows('receipts')}/{row['uid']}"), 204)
    frame = stream.wait_for_change(row["uid"], "delete")
    assert frame.data == {"op": "delete", "table": "receipts", "rowUid": row["uid"]}
    expect(feed.clerk.get(f"{feed.world.rows('receipts')}/{row['uid']}"), 404, "NOT_FOUND")


def test_bulk_update_and_delete_send_one_resync_to_the_org_they_ran_in(feed: Feed) -> None:
    outsider = feed.world.caller(feed.other_org, ["clerk"])
    here, there = feed.subscribe(feed.clerk), feed.subscribe(outsider)
    rows = [feed.insert(status="received") for _ in range(3)]
    feed.insert(outsider, status="received")
    here.wait_for_change(rows[-1]["uid"])
    route = feed.world.rows("invoices")
    assert expect(feed.clerk.patch(route, params={"status": "received"},
                                   json={"set": {"note": "bulk"}}), 200) == {"count": 3}
    resync = here.wait_for(lambda f: f.event == "resync")
    assert resync.data == {"reason": "bulk_change", "table": "invoices"} and resync.id is not None
    assert expect(feed.clerk.delete(route, params={"note": "bulk"}), 200) == {"count": 3}
    here.wait_until(lambda fs: len([f for f in fs if f.event == "resync"]) == 2)
    fence = feed.insert(outsider)
    there.wait_for_change(fence["uid"])
    assert not [f for f in there.events() if f.event == "resync"]
    assert strictly_increasing(here.ids())


def test_import_sends_one_insert_per_row_or_one_resync_past_a_thousand_rows(feed: Feed) -> None:
    stream = feed.subscribe(feed.clerk)
    route = f"{feed.world.rows('invoices')}/import"
    small = "number,amount\nIMP-1,1.00\nIMP-2,2.00\nIMP-3,3.00\n"
    expect(feed.clerk.post(route, content=small, headers={"Content-Type": "text/csv"}), 201)
    stream.wait_until(lambda fs: len([f for f in fs if f.is_change]) == 3)
    numbers = [f.data["row"]["number"] for f in stream.changes()]
    assert numbers == ["IMP-1", "IMP-2", "IMP-3"]
    large = "number\n" + "".join(f"BIG-{i}\n" for i in range(1001))
    assert expect(feed.clerk.post(route, content=large, headers={"Content-Type": "text/csv"}),
                  201) == {"inserted": 1001}
    resync = stream.wait_for(lambda f: f.event == "resync")
    assert resync.data == {"reason": "bulk_change", "table": "invoices"}
    fence = feed.insert()
    stream.wait_for_change(fence["uid"])
    assert len(stream.changes()) == 4  # three small-import inserts and the fence
    assert strictly_increasing(stream.ids())


# -- authorization changes reach open streams -----------------------------------------------

def test_redaction_change_applies_to_the_next_event_of_an_open_stream(feed: Feed) -> None:
    auditor = feed.world.caller(feed.org, ["auditor"])
    stream = feed.subscribe(auditor)
    before = feed.insert(amount="5.00")
    assert stream.wait_for_change(before["uid"]).data["row"]["amount"] == "[redacted]"
    feed.world.role("auditor", READ)  # no longer redacts amount
    after = feed.insert(amount="6.00")
    assert stream.wait_for_change(after["uid"]).data["row"]["amount"] == "6.00"
    feed.world.role("auditor", READ, redact={"invoices": ["amount", "note"]})
    again = feed.insert(amount="7.00", note="secret")
    row = stream.wait_for_change(again["uid"]).data["row"]
    assert row["amount"] == "[redacted]" and row["note"] == "[redacted]"
    assert "secret" not in stream.text()


def test_role_change_applies_to_the_next_event_of_an_open_stream(feed: Feed) -> None:
    user = feed.world.user()
    feed.world.member(feed.org, user["uid"], ["clerk"])
    member = feed.world.login(user, feed.org)
    stream = feed.subscribe(member)
    first_draft = feed.insert(status="draft")
    stream.wait_for_change(first_draft["uid"])
    feed.world.member(feed.org, user["uid"], ["no_drafts"])
    second_draft = feed.insert(status="draft")
    fence = feed.insert()
    stream.wait_for_change(fence["uid"])
    assert second_draft["uid"] not in stream.text()
    feed.world.member(feed.org, user["uid"], ["auditor"])
    redacted = feed.insert(amount="1.00", status="draft")
    assert stream.wait_for_change(redacted["uid"]).data["row"]["amount"] == "[redacted]"


def test_membership_removal_ends_the_open_stream_at_the_next_event(feed: Feed) -> None:
    user = feed.world.user()
    feed.world.member(feed.org, user["uid"], ["clerk"])
    member = feed.world.login(user, feed.org)
    stream = feed.subscribe(member)
    before = feed.insert()
    stream.wait_for_change(before["uid"])
    expect(feed.world.admin.delete(f"{feed.world.base}/orgs/{feed.org}/members/{user['uid']}"), 204)
    after = feed.insert()
    stream.wait_ended()
    assert after["uid"] not in stream.text()
    assert stream.error is None


# -- resuming -------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["header", "query"])
def test_viewer_resuming_gets_exactly_the_missed_events_it_may_see(feed: Feed, how: str) -> None:
    viewer = feed.world.caller(feed.org, ["no_drafts"])
    reference = feed.subscribe(viewer)  # stays connected throughout
    first = feed.subscribe(viewer)
    kept, old_draft, deleted = feed.insert(), feed.insert(status="draft"), feed.insert()
    last = first.wait_for_change(deleted["uid"]).pos
    first.close()

    # Missed while away: visible and invisible inserts, updates and deletes.
    shown = feed.insert()
    hidden = feed.insert(status="draft")
    feed.update(shown["uid"], note="edited")
    feed.update(hidden["uid"], note="edited")
    feed.delete(deleted["uid"])
    feed.delete(old_draft["uid"])
    fence = feed.insert()
    reference.wait_for_change(fence["uid"])

    resume: dict[str, Any] = ({"last_event_id": last} if how == "header"
                              else {"params": {"lastEventId": str(last)}})
    resumed = feed.subscribe(viewer, **resume)
    resumed.wait_for_change(fence["uid"])
    expected = [("insert", shown["uid"]), ("update", shown["uid"]), ("delete", deleted["uid"]),
                ("insert", fence["uid"])]
    assert [(f.op, f.row_uid) for f in resumed.changes()] == expected
    assert change_keys(resumed) == change_keys(reference, after=last)
    assert hidden["uid"] not in resumed.text() and old_draft["uid"] not in resumed.text()
    assert kept["uid"] not in resumed.text()

    live = feed.insert()  # then it goes live
    resumed.wait_for_change(live["uid"])
    assert strictly_increasing(resumed.ids())
    assert min(resumed.ids()) > last


def test_invalid_position_for_garbage_or_a_future_id_resyncs_at_the_head(
        feed: Feed, database_url: str) -> None:
    seed = feed.insert()
    probe = feed.subscribe(feed.clerk, last_event_id=0)
    probe.wait_for_change(seed["uid"])
    head = log_head(database_url)
    for bad in ("abc", "12abc", "1.5", "-1", str(head + 1000)):
        for how in ("header", "query"):
            resume: dict[str, Any] = ({"last_event_id": bad} if how == "header"
                                      else {"params": {"lastEventId": bad}})
            stream = feed.subscribe(feed.clerk, **resume)
            frame = stream.wait_for(lambda f: f.event == "resync")
            assert frame.data == {"reason": "invalid_position"}, (bad, how)
            assert frame.pos == head, (bad, how)
            assert not stream.changes(), (bad, how)  # nothing replayed
            stream.close()
    stream = feed.subscribe(feed.clerk, last_event_id="garbage")
    live = feed.insert()
    assert stream.wait_for_change(live["uid"]).pos > head


# -- servers with small settings: replay limit and ping -------------------------------------

@pytest.fixture(scope="module")
def tuned_clock(tmp_path_factory: pytest.TempPathFactory) -> TestClock:
    return TestClock.at_zero(tmp_path_factory.mktemp("tuned-clock"))


@pytest.fixture(scope="module")
def tuned(database_url: str, data_dir: Path, tuned_clock: TestClock) -> Iterator[ServerProcess]:
    """A second server on the same database: replay limit 5, ping every 0.5 s, a test clock."""
    proc = start_server(database_url, data_dir, AUTHORIC_SSE_REPLAY_LIMIT="5",
                        AUTHORIC_SSE_PING_INTERVAL="0.5", **tuned_clock.env())
    yield proc
    proc.stop()


def test_clerk_far_behind_gets_five_replayed_then_backfill_truncated_at_the_head(
        feed: Feed, tuned: ServerProcess, database_url: str) -> None:
    watcher = feed.subscribe(feed.clerk)
    start = feed.insert()
    since = watcher.wait_for_change(start["uid"]).pos
    rows = [feed.insert() for _ in range(8)]
    watcher.wait_for_change(rows[-1]["uid"])
    positions = [f.pos for f in watcher.changes() if f.pos > since]
    assert len(positions) == 8
    head = log_head(database_url)

    stream = feed.subscribe(feed.clerk, server=tuned, last_event_id=since)
    resync = stream.wait_for(lambda f: f.event == "resync")
    replayed = [f for f in stream.changes() if f.pos < resync.pos]
    assert [f.pos for f in replayed] == positions[:5]
    assert resync.data == {"reason": "backfill_truncated", "lastId": positions[4]}
    assert resync.pos == head
    live = feed.insert()
    frame = stream.wait_for_change(live["uid"])
    assert frame.pos > head
    assert strictly_increasing(stream.ids())
    assert [f.row_uid for f in stream.changes()] == [r["uid"] for r in rows[:5]] + [live["uid"]]


def test_idle_clerk_receives_ping_comments(feed: Feed, tuned: ServerProcess) -> None:
    stream = feed.subscribe(feed.clerk, server=tuned)
    stream.wait_until(lambda fs: len([f for f in fs if f.comment == "ping"]) >= 3, timeout=60)
    assert not stream.changes()


def test_idle_clerk_with_default_settings_gets_no_ping_early(feed: Feed) -> None:
    stream = feed.subscribe(feed.clerk)
    fence = feed.insert()
    stream.wait_for_change(fence["uid"])
    assert not [f for f in stream.frames if f.is_comment]


# -- token expiry -----------------------------------------------------------------------------

def test_a_member_whose_token_expires_on_an_idle_stream_gets_reauth_and_the_end(
        feed: Feed, tuned: ServerProcess, tuned_clock: TestClock) -> None:
    # The tuned server's clock is moved rather than the token's lifetime waited out. A minute
    # before the expiry the stream still delivers; past it, with no event to carry it, the
    # stream sends `reauth` on its own and ends.
    user = feed.world.user()
    feed.world.member(feed.org, user["uid"], ["clerk"])
    member = feed.world.login(user, feed.org)
    assert member.token is not None
    exp = token_exp(member.token)
    stream = feed.subscribe(member, server=tuned)
    try:
        tuned_clock.set(exp - time.time() - 60)
        fence = feed.insert()
        stream.wait_for_change(fence["uid"])
        assert not [f for f in stream.frames if f.event == "reauth"]  # not before the expiry
        tuned_clock.set(exp - time.time() + 1)
        reauth = stream.wait_for(lambda f: f.event == "reauth", timeout=60)
        assert reauth.data == {"reason": "token_expired"} and reauth.id is None
        stream.wait_ended(timeout=60)
        assert stream.ended_at is not None
        assert stream.events()[-1].event == "reauth"
        assert [f.row_uid for f in stream.changes()] == [fence["uid"]]
        expired = feed.open(member, server=tuned)
        assert expired.status_code == 401
        assert json.loads(expired.body)["error"]["code"] == "TOKEN_EXPIRED"
    finally:
        tuned_clock.set(0)


# -- retention ----------------------------------------------------------------------------------

def test_clerk_resuming_from_before_the_retained_log_gets_backfill_expired_then_the_rest(
        database_url: str, tmp_path: Path) -> None:
    """Retention runs on the sequencer leader when it takes the lead, then every 60 s. This test
    uses a database of its own whose only server keeps changes 1 s, and makes the sequencer
    take the lead again (by terminating its connection) once the first changes are older
    than that."""
    url = fresh_database(database_url)
    proc = start_server(url, tmp_path, AUTHORIC_CHANGE_RETENTION="1")
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            world = AppWorld.create(proc, client)
            world.table("invoices", COLUMNS)
            org = world.org("Northwind")
            world.role("clerk", ["invoices:*"])
            feed = Feed(world, org, world.org("Southwind"), world.caller(org, ["clerk"]))
            try:
                _backfill_expired(feed, url)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nserver log:\n{proc.log()[-5000:]}") from exc
            finally:
                for stream in feed.streams:
                    stream.close()
    finally:
        proc.stop()
        drop_database(url)


def _backfill_expired(feed: Feed, url: str) -> None:
    watcher = feed.subscribe(feed.clerk)
    old = [feed.insert() for _ in range(3)]
    watcher.wait_for_change(old[-1]["uid"])
    first, expired_upto = watcher.changes()[0].pos, watcher.changes()[-1].pos
    _poll(lambda: db_value(url, "SELECT count(*) FROM authoric.changes WHERE pos <= $1 AND "
                                "created_at >= now() - interval '1.5 seconds'", expired_upto) == 0)
    assert terminate(url, "authoric-sequencer")  # the next leader runs retention first
    _poll(lambda: (db_value(url, "SELECT pos FROM authoric.log_horizon WHERE id = 1") or 0)
          >= expired_upto)
    remaining = feed.insert()
    watcher.wait_for_change(remaining["uid"])

    stream = feed.subscribe(feed.clerk, last_event_id=first)
    stream.wait_for_change(remaining["uid"])
    events = stream.events()
    assert events[1].event == "resync" and events[1].data == {"reason": "backfill_expired"}
    assert events[1].id is None
    assert [f.row_uid for f in stream.changes()] == [remaining["uid"]]
    assert strictly_increasing(stream.ids())
    # resuming from the horizon itself lost nothing: no resync
    exact = feed.subscribe(feed.clerk, last_event_id=expired_upto)
    exact.wait_for_change(remaining["uid"])
    assert not [f for f in exact.events() if f.event == "resync"]


def _poll(condition: Callable[[], bool], timeout: float = 30) -> None:
    """Wait for a database condition (polling; the database sends no signal for these)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)
