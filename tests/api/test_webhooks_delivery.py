"""Webhooks (contract section 8) delivered to real receivers: HTTP servers this test starts.

The server here allows private targets (the receivers listen on 127.0.0.1) and retries after
at most 50-200 ms instead of 5 s-1 h, so retries are seen within the test; the SSRF rules run
with private targets refused (test_webhooks_ssrf.py).

Callers: the operator (admin token) manages webhooks; clerks of two orgs write invoices; a
viewer's role redacts `amount` and hides drafts.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from authoric.sdk import Authoric
from tests.receivers import DELIVERING, Receiver
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server
from tests.sse import SSEClient, db_fetch
from tests.waiting import wait_until

COLUMNS: list[dict[str, Any]] = [{"name": "number", "type": "text", "required": True},
                                 {"name": "status", "type": "text", "default": "received"},
                                 {"name": "amount", "type": "numeric"}]


@pytest.fixture(scope="module")
def hooks_server(database_url: str, tmp_path_factory: pytest.TempPathFactory,
                 ) -> Iterator[ServerProcess]:
    proc = start_server(database_url, tmp_path_factory.mktemp("webhooks"),
                        **DELIVERING)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def client(hooks_server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=hooks_server.url, timeout=30) as c:
        yield c


class Shop:
    def __init__(self, world: AppWorld) -> None:
        self.world = world
        world.table("invoices", COLUMNS)
        self.north, self.south = world.org("North"), world.org("South")
        world.role("clerk", ["invoices:*"])
        world.role("viewer", ["invoices:read_list", "invoices:read"],
                   row_policies={"invoices": {"status": {"ne": "draft"}}},
                   redact={"invoices": ["amount"]})
        self.north_clerk = world.caller(self.north, ["clerk"])
        self.south_clerk = world.caller(self.south, ["clerk"])
        self.receivers: list[Receiver] = []
        self.hooks: list[str] = []

    @property
    def admin(self) -> Caller:
        return self.world.admin

    @property
    def hooks_path(self) -> str:
        return f"{self.world.base}/webhooks"

    def receiver(self) -> Receiver:
        receiver = Receiver().start()
        self.receivers.append(receiver)
        return receiver

    def hook(self, receiver: Receiver, **body: Any) -> dict[str, Any]:
        made = expect(self.admin.post(self.hooks_path, json={"url": receiver.url,
                                                             "tables": ["invoices"], **body}), 201)
        self.hooks.append(made["uid"])
        return dict(made)

    def insert(self, clerk: Caller, number: str, **values: Any) -> dict[str, Any]:
        return dict(expect(clerk.post(self.world.rows("invoices"),
                                      json={"number": number, "amount": "10.00", **values}), 201))

    def deliveries(self, uid: str) -> list[dict[str, Any]]:
        return list(expect(self.admin.get(f"{self.hooks_path}/{uid}/deliveries?limit=1000"),
                           200)["items"])

    def wait_deliveries(self, uid: str, check: Callable[[list[dict[str, Any]]], bool],
                        timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            log = self.deliveries(uid)
            if check(log):
                return log
            assert time.monotonic() < deadline, f"the deliveries log never got there: {log}"
            time.sleep(0.05)

    def wait_status(self, uid: str, status: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = expect(self.admin.get(f"{self.hooks_path}/{uid}"), 200)
            if got["status"] == status:
                return dict(got)
            time.sleep(0.05)
        raise AssertionError(f"webhook never became {status}")


@pytest.fixture
def shop(hooks_server: ServerProcess, client: httpx.Client) -> Iterator[Shop]:
    setup = Shop(AppWorld.create(hooks_server, client))
    yield setup
    for uid in setup.hooks:  # a webhook left active would be delivered by later servers
        setup.admin.delete(f"{setup.hooks_path}/{uid}")
    for receiver in setup.receivers:
        receiver.stop()


def positions(received: list[Any]) -> list[int]:
    return [int(r.id) for r in received]


def metric(server: ServerProcess, name: str, uid: str) -> float | None:
    """A webhook's metric on /metrics (None: not there)."""
    text = httpx.get(f"{server.url}/metrics",
                     headers={"Authorization": f"Bearer {server.admin_token}"}).text
    prefix = f'{name}{{webhook="{uid}"}} '
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return None


def let_go(server: ServerProcess, uid: str, timeout: float = 30) -> None:
    """Wait until no process delivers the webhook (its holder let it go): from then on
    nothing can be sent to it until a claim takes it again, which only an active one gets."""
    deadline = time.monotonic() + timeout
    while metric(server, "authoric_webhook_delivering", uid) != 0:
        assert time.monotonic() < deadline, "the server still delivers the webhook"
        time.sleep(0.05)


def test_operator_creates_a_webhook_and_gets_each_change_signed_in_order(shop: Shop) -> None:
    receiver = shop.receiver()
    made = shop.hook(receiver)
    assert made["secret"].startswith("whsec_") and made["status"] == "active"
    assert made["ops"] == ["insert", "update", "delete"] and made["role"] is None
    listed = expect(shop.admin.get(shop.hooks_path), 200)["items"]
    assert [h["uid"] for h in listed] == [made["uid"]] and "secret" not in listed[0]
    assert "secret" not in expect(shop.admin.get(f"{shop.hooks_path}/{made['uid']}"), 200)

    # Each event is re-read when delivered (a row deleted since is not sent): wait for each.
    a = shop.insert(shop.north_clerk, "N-1")
    receiver.wait_count(1)
    expect(shop.north_clerk.patch(f"{shop.world.rows('invoices')}/{a['uid']}",
                                  json={"status": "paid"}), 200)
    b = shop.insert(shop.south_clerk, "S-1", status="draft")
    receiver.wait_count(3)
    expect(shop.north_clerk.delete(f"{shop.world.rows('invoices')}/{a['uid']}"), 204)
    got = receiver.wait_count(4)
    assert len(got) == 4
    hook = Webhook(made["secret"])
    bodies = [hook.verify(r.body, r.headers) for r in got]
    assert [b_["type"] for b_ in bodies] == ["insert", "update", "insert", "delete"]
    assert positions(got) == sorted(positions(got)) and len(set(positions(got))) == 4
    assert [int(b_["position"]) for b_ in bodies] == positions(got)
    for body in bodies:  # when the change was written: RFC 3339 in UTC
        written = datetime.fromisoformat(body["timestamp"].replace("Z", "+00:00"))
        assert body["timestamp"].endswith("Z")
        assert abs(written - datetime.now(UTC)) < timedelta(hours=1), body["timestamp"]
    assert bodies[0]["row"]["uid"] == a["uid"] and bodies[0]["row"]["amount"] == "10.00"
    assert bodies[0]["org"] == shop.north and bodies[2]["org"] == shop.south
    assert bodies[2]["row"]["uid"] == b["uid"]  # the operator's view: drafts too
    assert bodies[3] == {**bodies[3], "type": "delete", "rowUid": a["uid"], "table": "invoices",
                         "app": shop.world.name}
    assert got[0].headers["content-type"] == "application/json"
    # A signature made with another secret does not verify.
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "A" * 32).verify(got[0].body, got[0].headers)


def test_a_failing_receiver_holds_back_later_events_and_order_holds_under_retries(
        shop: Shop) -> None:
    receiver = shop.receiver()
    receiver.fail_next = 5
    made = shop.hook(receiver)
    made_rows = [shop.insert(shop.north_clerk, f"N-{i}") for i in range(6)]
    got = receiver.wait_count(6)
    assert [g.json()["row"]["uid"] for g in got] == [r["uid"] for r in made_rows]
    # Every request in arrival order: the first position five times, then each once.
    ids = [r.id for r in receiver.received()]
    assert ids[:6] == [ids[0]] * 6 and ids[5:] == [g.id for g in got]
    # A run of successes is recorded just after it is sent (webhooks/worker.py): wait for it.
    log = shop.wait_deliveries(made["uid"], lambda log: len(log) >= 11)
    first = [d for d in log if d["position"] == ids[0]]
    assert sorted(d["attempt"] for d in first) == [1, 2, 3, 4, 5, 6]
    answers = [(d["status"], d["error"]) for d in sorted(first, key=lambda d: d["attempt"])]
    assert answers == [(503, "HTTP 503")] * 5 + [(200, None)]
    assert all(d["durationMs"] >= 0 and d["at"] for d in log)


def test_a_paused_webhook_resumed_skips_nothing(shop: Shop,
                                                hooks_server: ServerProcess) -> None:
    receiver, control = shop.receiver(), shop.receiver()
    made = shop.hook(receiver)
    shop.hook(control)  # stays active: shows when the writes below have been delivered
    shop.insert(shop.north_clerk, "before")
    receiver.wait_count(1)
    path = f"{shop.hooks_path}/{made['uid']}"
    assert expect(shop.admin.patch(path, json={"status": "paused"}), 200)["status"] == "paused"
    let_go(hooks_server, made["uid"])
    paused = [shop.insert(shop.north_clerk, f"while-{i}") for i in range(3)]
    control.wait_count(4)  # the worker has read and delivered the writes made while paused
    assert len(receiver.first_seen()) == 1  # ... but not to the paused webhook
    expect(shop.admin.patch(path, json={"status": "active"}), 200)
    got = receiver.wait_count(4)
    assert [g.json()["row"]["uid"] for g in got[1:]] == [r["uid"] for r in paused]


def test_a_webhook_asking_for_deletes_only_moves_past_the_inserts_it_does_not_want(
        shop: Shop) -> None:
    # Its position follows its tables' changes, wanted or not, as a read of the log would move
    # it: a webhook whose position stood still at its last delete would fall behind the log's
    # retention and get a `resync` for changes it never asked for.
    deletes, control = shop.receiver(), shop.receiver()
    made = shop.hook(deletes, ops=["delete"])
    shop.hook(control)
    path = f"{shop.hooks_path}/{made['uid']}"

    def passes(position: str) -> None:
        deadline = time.monotonic() + 30
        while int(expect(shop.admin.get(path), 200)["position"]) < int(position):
            assert time.monotonic() < deadline, f"the position never passed {position}"
            time.sleep(0.05)

    # Both webhooks delivering: from here the worker takes their changes from what the relay
    # hands on (webhooks/handed.py), not from the log.
    shop.insert(shop.north_clerk, "first")
    passes(control.wait_count(1)[0].id)
    rows = [shop.insert(shop.north_clerk, f"I-{i}") for i in range(3)]
    last_insert = control.wait_count(4)[-1].id
    passes(last_insert)
    expect(shop.north_clerk.delete(f"{shop.world.rows('invoices')}/{rows[0]['uid']}"), 204)
    [got] = deletes.wait_count(1)
    assert got.json()["type"] == "delete" and got.json()["rowUid"] == rows[0]["uid"]
    assert int(got.id) > int(last_insert)


def test_replay_sends_again_from_a_position(shop: Shop) -> None:
    receiver = shop.receiver()
    made = shop.hook(receiver)
    rows = [shop.insert(shop.north_clerk, f"N-{i}") for i in range(3)]
    got = receiver.wait_count(3)
    second = got[1].id
    expect(shop.admin.post(f"{shop.hooks_path}/{made['uid']}/replay", json={"from": second}), 200)
    receiver.wait_for(lambda _: len(receiver.received()) >= 5, what="the replay")
    again = receiver.received()[3:]
    assert [r.id for r in again] == [got[1].id, got[2].id]
    assert [r.json()["row"]["uid"] for r in again] == [rows[1]["uid"], rows[2]["uid"]]
    expect(shop.admin.post(f"{shop.hooks_path}/{made['uid']}/replay", json={"from": "x"}), 422)
    # Replay sends again; it never skips ahead past changes not yet sent.
    path = f"{shop.hooks_path}/{made['uid']}"
    wait_until(lambda: expect(shop.admin.get(path), 200)["position"] == got[2].id,
               "the replay's records")
    ahead = str(int(got[2].id) + 2)
    refused = expect(shop.admin.post(f"{path}/replay", json={"from": ahead}), 422,
                     "VALIDATION_FAILED")
    assert refused["error"]["details"]["position"] == got[2].id
    assert expect(shop.admin.get(path), 200)["position"] == got[2].id
    expect(shop.admin.post(f"{path}/replay", json={"from": str(int(got[2].id) + 1)}), 200)


def lease_held(database_url: str, uid: str, timeout: float = 30) -> None:
    """Wait until a process holds the webhook's lease (the next claim after a replay)."""
    url = make_url(database_url).set(drivername="postgresql").render_as_string(
        hide_password=False)

    async def held() -> bool:
        conn = await asyncpg.connect(url)
        try:
            return bool(await conn.fetchval(
                "SELECT lease_owner IS NOT NULL FROM authoric.webhooks WHERE uid = $1",
                uuid.UUID(uid)))
        finally:
            await conn.close()

    deadline = time.monotonic() + timeout
    while not asyncio.run(held()):
        assert time.monotonic() < deadline, "no process claimed the webhook again"
        time.sleep(0.05)


def test_a_replay_while_a_delivery_is_in_flight_is_not_skipped_by_that_delivery(
        shop: Shop, database_url: str) -> None:
    # The delivery of the second row is held until the operator has replayed from the first
    # and the same process has claimed the webhook again: its success must not move the
    # cursor from where the replay put it.
    held, release = threading.Event(), threading.Event()
    first: list[str] = []  # the receiver's lock is held while it answers: noted here

    def hold_second(got: Any) -> tuple[int, dict[str, str]]:
        first.append(got.id)
        if got.json()["row"]["number"] == "N-1" and not held.is_set():
            held.set()
            release.wait(30)
        return 200, {}

    receiver = Receiver(answer=hold_second).start()
    shop.receivers.append(receiver)
    made = shop.hook(receiver)
    try:
        rows = [shop.insert(shop.north_clerk, f"N-{i}") for i in range(3)]
        assert held.wait(30), "the second delivery never arrived"
        expect(shop.admin.post(f"{shop.hooks_path}/{made['uid']}/replay",
                               json={"from": first[0]}), 200)
        lease_held(database_url, made["uid"])
    finally:
        release.set()
    got = receiver.wait_for(lambda g: len(g) == 3 and len(receiver.received()) >= 5,
                            what="the replay from the first row")
    assert [r.json()["row"]["uid"] for r in got] == [r["uid"] for r in rows]
    # Sent once each, then again from the replayed position: nothing after it skipped.
    ids = [r.id for r in receiver.received()]
    assert ids[:2] == [got[0].id, got[1].id] and ids[2:5] == [r.id for r in got]


def viewer_webhook_and_stream(shop: Shop, **hook: Any) -> tuple[Receiver, dict[str, Any],
                                                                 SSEClient]:
    """A viewer webhook (with `hook`'s fields) to a new receiver, and a North viewer's stream
    of the table, connected."""
    receiver = shop.receiver()
    made = shop.hook(receiver, role="viewer", **hook)
    viewer = shop.world.caller(shop.north, ["viewer"])
    stream = SSEClient(shop.world.server.url, f"{shop.world.rows('invoices')}/subscribe",
                       viewer.token)
    stream.wait_connected()
    return receiver, made, stream


def test_a_role_webhook_sees_exactly_what_a_members_stream_of_that_role_sees(shop: Shop) -> None:
    receiver, made, stream = viewer_webhook_and_stream(shop)
    try:
        shown = shop.insert(shop.north_clerk, "N-1")
        # Both re-read at delivery: let both see N-1 before it is deleted.
        stream.wait_for_change(shown["uid"], "insert")
        receiver.wait_count(1)
        shop.insert(shop.north_clerk, "N-draft", status="draft")
        draft_deleted = shop.insert(shop.north_clerk, "N-draft-2", status="draft")
        expect(shop.north_clerk.delete(f"{shop.world.rows('invoices')}/{draft_deleted['uid']}"),
               204)
        expect(shop.north_clerk.delete(f"{shop.world.rows('invoices')}/{shown['uid']}"), 204)
        last = shop.insert(shop.north_clerk, "N-2")
        stream.wait_for_change(last["uid"], "insert")
        got = receiver.wait_for(lambda g: any(r.json().get("row", {}).get("uid") == last["uid"]
                                              for r in g))
        events = [e for e in stream.events() if e.event in (None, "message") and e.id]
        from_stream = [(int(e.id), {k: v for k, v in e.data.items() if k != "op"}, e.data["op"])
                       for e in events]
        from_hook = [(int(r.id), {k: v for k, v in r.json().items()
                                  if k in ("table", "row", "rowUid")}, r.json()["type"])
                     for r in got]
        assert from_hook == from_stream
        assert all(r.json()["row"]["amount"] == "[redacted]" for r in got if "row" in r.json())
        # No draft, nor a draft's delete; N-1's delete (judged as the row stood) and N-2.
        assert [(r.json()["type"], r.json().get("rowUid", r.json().get("row", {}).get("uid")))
                for r in got] == [("insert", shown["uid"]), ("delete", shown["uid"]),
                                  ("insert", last["uid"])]
        assert all(r.json().get("row", {}).get("status") != "draft" for r in got)
        assert draft_deleted["uid"] not in str([r.json() for r in got])
    finally:
        stream.close()
    assert made["role"] == "viewer"


def judged_by(server: ServerProcess, uid: str) -> dict[str, float]:
    """A webhook's `authoric_webhook_judged_changes_total` by whose re-read judged them."""
    text = httpx.get(f"{server.url}/metrics",
                     headers={"Authorization": f"Bearer {server.admin_token}"}).text
    found = {}
    for line in text.splitlines():
        if line.startswith("authoric_webhook_judged_changes_total{") and f'"{uid}"' in line:
            labels, value = line.split("} ")
            by = labels.split('by="')[1].split('"')[0]
            found[by] = float(value)
    return found


def test_a_role_webhook_reuses_the_verdicts_of_a_stream_of_its_read_class(shop: Shop) -> None:
    """One re-read per read class: with a viewer's stream open in North, the viewer webhook
    takes the stream's verdicts instead of re-reading, and still gets what the stream gets."""
    receiver, made, stream = viewer_webhook_and_stream(shop, org=shop.north)
    try:
        # A webhook of one org asks the hub to keep its class's verdicts on its first pass;
        # the first change may come before that pass and be judged by the webhook itself.
        first = shop.insert(shop.north_clerk, "N-0")
        receiver.wait_for(lambda g: any(r.json().get("row", {}).get("uid") == first["uid"]
                                        for r in g))
        written = []
        for n in range(5):  # one at a time: each a batch of its own, judged by the hub first
            row = shop.insert(shop.north_clerk, f"N-{n + 1}",
                              status="draft" if n == 2 else "received")
            written.append(row)
            if n != 2:
                stream.wait_for_change(row["uid"], "insert")
                receiver.wait_for(lambda g, uid=row["uid"]: any(
                    r.json().get("row", {}).get("uid") == uid for r in g))
        got = receiver.received()
        events = [e for e in stream.events() if e.event in (None, "message") and e.id]
        assert [(int(r.id), r.json()["row"]) for r in got] == [
            (int(e.id), e.data["row"]) for e in events]
        assert all(r.json()["row"]["amount"] == "[redacted]" for r in got)
        assert written[2]["uid"] not in str([r.json() for r in got])  # the draft: hidden
        counts = judged_by(shop.world.server, made["uid"])
        assert counts.get("shared", 0) >= 5, counts  # every one after the first at least
        assert counts.get("shared", 0) + counts.get("own", 0) == 6
    finally:
        stream.close()


async def sdk_create(database_url: str, app: str, org: str, number: str) -> None:
    sdk = await Authoric.connect(database_url)
    try:
        async with sdk.as_app(app, uuid.UUID(org)) as session:
            await session.create("invoices", {"number": number})
    finally:
        await sdk.close()


def test_rows_written_by_import_the_console_plain_sql_and_the_sdk_are_delivered_in_order(
        shop: Shop, database_url: str) -> None:
    """Issue 41: every write path produces deliveries. REST and bulk have their own tests;
    here a CSV import (a clerk), the operator's console rows, a captured SQL insert and a
    background job's write through the server-side SDK (acting as the app in North)."""
    receiver = shop.receiver()
    shop.hook(receiver)
    table = expect(shop.admin.patch(f"{shop.world.base}/tables/invoices",
                                    json={"captureSqlWrites": True}), 200)
    expect(shop.north_clerk.post(f"{shop.world.rows('invoices')}/import",
                                 content=b"number\nIMP-1\n",
                                 headers={"Content-Type": "text/csv"}), 201)
    expect(shop.admin.post(f"{shop.world.base}/tables/invoices/rows",
                           json={"org": shop.north, "number": "CONSOLE-1"}), 201)
    db_fetch(database_url, f"INSERT INTO {table['sqlName']} (org_uid, number) VALUES ($1, $2)",
             uuid.UUID(shop.north), "SQL-1")
    asyncio.run(sdk_create(database_url, shop.world.name, shop.north, "SDK-1"))
    got = receiver.wait_count(4)
    assert [g.json()["row"]["number"] for g in got] == ["IMP-1", "CONSOLE-1", "SQL-1", "SDK-1"]
    assert all(g.json()["type"] == "insert" for g in got)
    assert positions(got) == sorted(positions(got))


def test_a_bulk_update_sends_one_resync_per_org_it_ran_in(shop: Shop) -> None:
    receiver = shop.receiver()
    shop.hook(receiver)
    shop.insert(shop.north_clerk, "N-1")
    expect(shop.north_clerk.patch(shop.world.rows("invoices"), params={"status": "received"},
                                  json={"set": {"status": "paid"}}), 200)
    got = receiver.wait_count(2)
    assert got[1].json() == {**got[1].json(), "type": "resync", "reason": "bulk_change",
                             "org": shop.north, "table": "invoices"}


def test_a_large_import_and_a_large_sql_statement_each_send_one_resync(
        shop: Shop, database_url: str) -> None:
    """Issue 41: large imports and SQL statements over 1,000 rows send `resync` (bulk_change)
    to a webhook, as to a stream, in place of a delivery per row."""
    receiver = shop.receiver()
    shop.hook(receiver)
    table = expect(shop.admin.patch(f"{shop.world.base}/tables/invoices",
                                    json={"captureSqlWrites": True}), 200)
    csv = "number\n" + "".join(f"IMP-{i}\n" for i in range(1001))
    assert expect(shop.north_clerk.post(f"{shop.world.rows('invoices')}/import",
                                        content=csv.encode(),
                                        headers={"Content-Type": "text/csv"}),
                  201) == {"inserted": 1001}
    shop.insert(shop.north_clerk, "AFTER-IMPORT")
    db_fetch(database_url, f"INSERT INTO {table['sqlName']} (org_uid, number) "
             "SELECT $1, 'SQL-' || g FROM generate_series(1, 1500) g", uuid.UUID(shop.north))
    shop.insert(shop.north_clerk, "AFTER-SQL")
    got = [g.json() for g in receiver.wait_count(4)]
    resync = {"type": "resync", "reason": "bulk_change", "org": shop.north, "table": "invoices"}
    assert [{k: g.get(k) for k in resync} for g in got[0::2]] == [resync, resync]
    assert [(g["type"], g["row"]["number"]) for g in got[1::2]] == [
        ("insert", "AFTER-IMPORT"), ("insert", "AFTER-SQL")]
    assert len(receiver.received()) == 4


def test_a_redirect_is_not_followed_and_counts_as_a_failure(shop: Shop) -> None:
    target = shop.receiver()
    redirecting = shop.receiver()
    redirecting.answer = lambda _: (307, {"location": target.url})
    made = shop.hook(redirecting)
    shop.insert(shop.north_clerk, "N-1")
    redirecting.wait_for(lambda _: len(redirecting.received()) >= 2, what="retries")
    assert target.received() == []
    assert {d["status"] for d in shop.deliveries(made["uid"])} == {307}


def test_after_the_retry_window_a_webhook_is_failing_until_the_operator_resumes_it(
        shop: Shop, hooks_server: ServerProcess) -> None:
    expect(shop.admin.patch(shop.world.base, json={"settings": {"webhookRetryHours": 0.0003}}),
           200)  # about a second
    receiver = shop.receiver()
    receiver.answer = lambda _: (500, {})
    made = shop.hook(receiver)
    rows = [shop.insert(shop.north_clerk, f"N-{i}") for i in range(2)]
    failing = shop.wait_status(made["uid"], "failing")
    assert failing["failingSince"] is not None
    let_go(hooks_server, made["uid"])  # failing: nothing more is tried
    # Every attempt the receiver got is in the log, none made after the webhook turned failing.
    attempts = shop.deliveries(made["uid"])
    assert len(receiver.received()) == len(attempts) == max(d["attempt"] for d in attempts)
    assert all(d["status"] == 500 for d in attempts)
    receiver.answer = None
    expect(shop.admin.patch(f"{shop.hooks_path}/{made['uid']}", json={"status": "active"}), 200)
    got = receiver.wait_count(2)
    assert [g.json()["row"]["uid"] for g in got] == [r["uid"] for r in rows]


def test_operator_rotates_the_secret_and_later_deliveries_use_it(shop: Shop) -> None:
    receiver = shop.receiver()
    made = shop.hook(receiver)
    rotated = expect(shop.admin.post(f"{shop.hooks_path}/{made['uid']}/secret"), 200)
    assert rotated["secret"] != made["secret"] and rotated["secret"].startswith("whsec_")
    shop.insert(shop.north_clerk, "N-1")
    got = receiver.wait_count(1)
    Webhook(rotated["secret"]).verify(got[0].body, got[0].headers)


def test_webhook_changes_are_audited_without_their_secret(shop: Shop,
                                                          hooks_server: ServerProcess) -> None:
    receiver = shop.receiver()
    receiver.fail_next = 1  # a failed attempt too: its error is logged and recorded
    made = shop.hook(receiver)
    path = f"{shop.hooks_path}/{made['uid']}"
    rotated = expect(shop.admin.post(f"{path}/secret"), 200)
    expect(shop.admin.patch(path, json={"ops": ["insert"]}), 200)
    expect(shop.admin.post(f"{path}/replay", json={"from": "1"}), 200)
    shop.insert(shop.north_clerk, "N-1")
    wait_until(lambda: [d["status"] for d in shop.deliveries(made["uid"])] == [200, 503],
               "the failed attempt and the success in the log")
    deliveries = str(shop.deliveries(made["uid"]))
    expect(shop.admin.delete(path), 204)
    entries = expect(shop.admin.get(f"{shop.world.base}/audit"), 200)["items"]
    actions = [e["action"] for e in entries]
    assert {"webhook.create", "webhook_secret.rotate", "webhook.update",
            "webhook.replay", "webhook.delete"} <= set(actions)
    # Neither secret in the audit log, the deliveries log or the server's log.
    for text in (str(entries), deliveries, hooks_server.log()):
        assert made["secret"] not in text and rotated["secret"] not in text
    assert "whsec_" not in text


def test_bad_webhook_requests_get_the_contracts_codes_and_change_nothing(shop: Shop) -> None:
    base = {"url": "http://127.0.0.1:9/hook", "tables": ["invoices"]}
    for body in ({**base, "url": "ftp://example.com/"}, {**base, "tables": ["nope"]},
                 {**base, "role": "nobody"}, {**base, "ops": ["upsert"]}, {**base, "tables": []},
                 {**base, "org": "00000000-0000-7000-8000-000000000000"}, {"url": base["url"]}):
        expect(shop.admin.post(shop.hooks_path, json=body), 422, "VALIDATION_FAILED")
    assert expect(shop.admin.get(shop.hooks_path), 200)["items"] == []
    anonymous = Caller(shop.admin.client)
    expect(anonymous.get(shop.hooks_path), 401, "UNAUTHENTICATED")
    expect(shop.admin.get(f"{shop.hooks_path}/0199aaaa-0000-7000-8000-000000000000"), 404,
           "NOT_FOUND")
    expect(shop.admin.get(f"/admin/apps/nope_{shop.world.name}/webhooks"), 404, "NOT_FOUND")


def test_metrics_show_each_webhooks_deliveries_failures_and_lag(shop: Shop,
                                                                hooks_server: ServerProcess,
                                                                ) -> None:
    receiver = shop.receiver()
    receiver.fail_next = 1
    made = shop.hook(receiver)
    shop.insert(shop.north_clerk, "N-1")
    receiver.wait_count(1)
    deadline = time.monotonic() + 10
    text = ""
    while time.monotonic() < deadline:
        text = httpx.get(f"{hooks_server.url}/metrics",
                         headers={"Authorization": f"Bearer {hooks_server.admin_token}"}).text
        if f'authoric_webhook_deliveries_total{{webhook="{made["uid"]}"}} 1.0' in text:
            break
        time.sleep(0.2)
    assert f'authoric_webhook_deliveries_total{{webhook="{made["uid"]}"}} 1.0' in text
    assert f'authoric_webhook_failures_total{{webhook="{made["uid"]}"}} 1.0' in text
    assert f'authoric_webhook_lag_positions{{webhook="{made["uid"]}"}}' in text
    assert f'authoric_webhook_lag_seconds{{webhook="{made["uid"]}"}}' in text
    assert f'authoric_webhook_delivering{{webhook="{made["uid"]}"}} 1.0' in text



def test_operator_sends_a_test_delivery_that_moves_nothing(shop: Shop) -> None:
    receiver = shop.receiver()
    made = shop.hook(receiver)
    answer = expect(shop.admin.post(f"{shop.hooks_path}/{made['uid']}/test"), 200)
    assert answer["status"] == 200 and answer["error"] is None and answer["durationMs"] >= 0
    got = receiver.received()
    assert len(got) == 1 and got[0].id.startswith("test_")
    assert Webhook(made["secret"]).verify(got[0].body, got[0].headers)["type"] == "test"
    assert shop.deliveries(made["uid"]) == []
    receiver.answer = lambda _: (410, {})
    assert expect(shop.admin.post(f"{shop.hooks_path}/{made['uid']}/test"), 200)["status"] == 410


def _bills(world: AppWorld) -> None:
    """Bills referencing vendors, which reference countries."""
    world.table("countries", [{"name": "code", "type": "text", "required": True}])
    world.table("vendors", [{"name": "name", "type": "text", "required": True},
                            {"name": "iban", "type": "text"},
                            {"name": "country", "type": "reference", "references": "countries"}])
    world.table("bills", [{"name": "number", "type": "text", "required": True},
                          {"name": "vendor", "type": "reference", "references": "vendors"}])


def test_an_operator_webhook_expands_references_as_the_operator_reads_them(shop: Shop) -> None:
    world = shop.world
    _bills(world)
    world.role("buyer", ["countries:*", "vendors:*", "bills:*"], redact={"vendors": ["iban"]})
    buyer = world.caller(shop.south, ["buyer"])
    operator_receiver, buyer_receiver = shop.receiver(), shop.receiver()
    shop.hook(operator_receiver, tables=["bills"], expand=["vendor.country"])
    shop.hook(buyer_receiver, tables=["bills"], role="buyer", expand=["vendor.country"])
    country = expect(buyer.post(world.rows("countries"), json={"code": "NO"}), 201)
    vendor = expect(buyer.post(world.rows("vendors"), json={
        "name": "Fjord AS", "iban": "NO9386011117947", "country_uid": country["uid"]}), 201)
    bill = expect(buyer.post(world.rows("bills"), json={"number": "B-1",
                                                        "vendor_uid": vendor["uid"]}), 201)
    orphan = expect(buyer.post(world.rows("bills"), json={"number": "B-2"}), 201)

    operator_got = operator_receiver.wait_count(2)
    first, second = (r.json() for r in operator_got)
    assert first["row"]["uid"] == bill["uid"] and second["row"]["uid"] == orphan["uid"]
    # The operator's view: the vendor unredacted, its country nested inside it.
    expanded = first["row"]["expand"]["vendor"]
    assert expanded["uid"] == vendor["uid"] and expanded["iban"] == "NO9386011117947"
    assert expanded["expand"]["country"]["code"] == "NO"
    assert first["row"]["vendor_uid"] == vendor["uid"]
    assert second["row"]["expand"] == {"vendor": None}  # a null reference expands to null
    # The same webhook as a role that redacts `iban` gets the vendor as that role reads it.
    buyer_got = buyer_receiver.wait_count(2)
    assert buyer_got[0].json()["row"]["expand"]["vendor"]["iban"] == "[redacted]"
    assert buyer_got[0].json()["row"]["expand"]["vendor"]["expand"]["country"]["code"] == "NO"


def test_an_expand_path_none_of_the_webhooks_tables_follows_gets_422_and_changes_nothing(
        shop: Shop) -> None:
    """An operator's typo in `expand` (or a plain column) is refused at create and at PATCH,
    not delivered as `null` for ever; a webhook over several tables needs each path on one."""
    _bills(shop.world)
    receiver = shop.receiver()
    for tables, expand in ((["bills"], ["vendr"]), (["bills"], ["vendor.name"]),
                           (["bills"], ["number"]), (["countries"], ["vendor"])):
        refused = expect(shop.admin.post(shop.hooks_path, json={
            "url": receiver.url, "tables": tables, "expand": expand}), 422, "VALIDATION_FAILED")
        assert refused["error"]["details"]["expand"] == expand, refused
    assert expect(shop.admin.get(shop.hooks_path), 200)["items"] == []

    made = shop.hook(receiver, tables=["bills", "vendors"], expand=["vendor", "country"])
    assert made["expand"] == ["vendor", "country"]
    path = f"{shop.hooks_path}/{made['uid']}"
    expect(shop.admin.patch(path, json={"expand": ["vendor.nope"]}), 422, "VALIDATION_FAILED")
    # Dropping `vendors` would leave `country` followed by no table: refused as well.
    expect(shop.admin.patch(path, json={"tables": ["bills"]}), 422, "VALIDATION_FAILED")
    kept = expect(shop.admin.get(path), 200)
    assert (kept["tables"], kept["expand"]) == (["bills", "vendors"], ["vendor", "country"])
    changed = expect(shop.admin.patch(path, json={"tables": ["bills"],
                                                  "expand": ["vendor.country"]}), 200)
    assert (changed["tables"], changed["expand"]) == (["bills"], ["vendor.country"])


def test_operator_pages_through_a_webhooks_deliveries_newest_first(shop: Shop) -> None:
    receiver = shop.receiver()
    made = shop.hook(receiver)
    for i in range(3):
        shop.insert(shop.north_clerk, f"N-{i}")
    positions = [r.id for r in receiver.wait_count(3)]
    path = f"{shop.hooks_path}/{made['uid']}/deliveries"
    wait_until(lambda: len(shop.deliveries(made["uid"])) == 3, "three records")
    first = expect(shop.admin.get(f"{path}?limit=2"), 200)
    assert [d["position"] for d in first["items"]] == positions[:0:-1]  # the newest two
    assert first["next"] is not None
    last = expect(shop.admin.get(f"{path}?limit=2&after={first['next']}"), 200)
    assert [d["position"] for d in last["items"]] == positions[:1] and last["next"] is None
    for bad in ("limit=0", "limit=x", "after=x"):
        expect(shop.admin.get(f"{path}?{bad}"), 400)
    # Deleted (204), the webhook and its deliveries are gone.
    deleted = shop.admin.delete(f"{shop.hooks_path}/{made['uid']}")
    assert deleted.status_code == 204 and deleted.content == b""
    expect(shop.admin.get(f"{shop.hooks_path}/{made['uid']}"), 404, "NOT_FOUND")
    expect(shop.admin.get(path), 404, "NOT_FOUND")


HANG_S = 12.0  # a receiver that takes this long to answer: longer than an attempt's 10 s


def test_a_receiver_that_answers_after_10_s_has_failed_that_attempt_and_gets_a_retry(
        shop: Shop) -> None:
    """Contract section 8: a delivery succeeds on a 2xx within 10 s. A later 200 does not
    count: the attempt is recorded as failed, and the retry delivers the same change."""
    hung = threading.Event()

    def slow_once(_: Any) -> tuple[int, dict[str, str]]:
        if not hung.is_set():
            hung.set()
            time.sleep(HANG_S)
        return 200, {}

    receiver = shop.receiver()
    receiver.answer = slow_once
    made = shop.hook(receiver)
    shop.insert(shop.north_clerk, "N-1")
    wait_until(lambda: any(d["status"] == 200 for d in shop.deliveries(made["uid"])),
               "the retry's success", timeout=90)
    first, *rest = reversed(shop.deliveries(made["uid"]))  # oldest first
    assert (first["status"], first["error"]) == (None, "no answer within 10 s"), first
    assert first["durationMs"] >= 9_900, first  # ended by the bound, not by an answer
    assert [d["status"] for d in rest] == [200]
    assert {r.id for r in receiver.received()} == {first["position"]}


def test_a_patched_webhook_delivers_what_follows_to_its_new_url_ops_and_role(
        shop: Shop) -> None:
    """An operator moves a webhook to another receiver, to deletes only, then to a role that
    redacts `amount`: each change applies from the next delivery on."""
    old, new = shop.receiver(), shop.receiver()
    made = shop.hook(old)
    path = f"{shop.hooks_path}/{made['uid']}"
    first = shop.insert(shop.north_clerk, "N-1")
    old.wait_count(1)
    expect(shop.admin.patch(path, json={"url": new.url, "ops": ["delete"]}), 200)
    shop.insert(shop.north_clerk, "N-2")  # an insert: no longer wanted
    expect(shop.north_clerk.delete(f"{shop.world.rows('invoices')}/{first['uid']}"), 204)
    [deleted] = new.wait_count(1)
    assert (deleted.json()["type"], deleted.json()["rowUid"]) == ("delete", first["uid"])
    expect(shop.admin.patch(path, json={"ops": ["insert"], "role": "viewer"}), 200)
    shop.insert(shop.north_clerk, "N-3", status="received")
    got = new.wait_count(2)[1].json()
    assert (got["type"], got["row"]["number"], got["row"]["amount"]) == (
        "insert", "N-3", "[redacted]")
    assert len(old.received()) == 1 and len(new.received()) == 2


def test_a_change_of_the_tables_columns_sends_resync_schema_change_then_rows_as_they_now_are(
        shop: Shop) -> None:
    """An operator renames a column: each webhook of the table gets a `resync` `schema_change`
    for each org it covers (every org, or North only) before the rows written after it, which
    carry the new name."""
    everyone, north_only = shop.receiver(), shop.receiver()
    shop.hook(everyone)
    shop.hook(north_only, org=shop.north)
    expect(shop.admin.patch(f"{shop.world.base}/tables/invoices",
                            json={"renameColumns": {"number": "ref"}}), 200)
    row = expect(shop.north_clerk.post(shop.world.rows("invoices"), json={"ref": "R-1"}), 201)
    for receiver, orgs in ((everyone, {shop.north, shop.south}), (north_only, {shop.north})):
        got = [r.json() for r in receiver.wait_count(len(orgs) + 1)]
        *resyncs, insert = got
        assert len(got) == len(orgs) + 1, got
        assert {(r["type"], r["reason"], r["table"]) for r in resyncs} == {
            ("resync", "schema_change", "invoices")}, resyncs
        assert {r["org"] for r in resyncs} == orgs
        assert (insert["type"], insert["row"]["uid"], insert["row"]["ref"]) == (
            "insert", row["uid"], "R-1")
        assert "number" not in insert["row"]
