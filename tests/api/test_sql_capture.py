"""SQL capture (contract section 5, `captureSqlWrites`): writes made directly in the database
reach subscribers like platform writes, judged and redacted, in the same order of positions.

Callers: an operator writing with plain SQL (asyncpg on the server's database, as another
service or `psql` would), a clerk writing over REST, and subscribers: an auditor (amount
redacted), a viewer whose row policy hides drafts, and a member of another org.

To show that something was *not* sent, a test writes a later "fence" row the subscriber may
see and waits for it: the feed delivers in position order.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.sse import SSEClient, db_fetch, strictly_increasing

COLUMNS: list[dict[str, Any]] = [
    {"name": "number", "type": "text", "required": True},
    {"name": "status", "type": "text", "default": "received"},
    {"name": "amount", "type": "numeric"}]
READ = ["invoices:read_list", "invoices:read"]


@dataclass
class Captured:
    world: AppWorld
    url: str
    sql_name: str
    org: str
    other_org: str
    clerk: Caller
    streams: list[SSEClient] = field(default_factory=list)
    counter: int = 0

    def subscribe(self, caller: Caller, table: str = "invoices", **kw: Any) -> SSEClient:
        stream = SSEClient(self.world.server.url, f"{self.world.rows(table)}/subscribe",
                           caller.token, **kw)
        self.streams.append(stream)
        assert stream.status_code == 200, (stream.status_code, stream.body)
        stream.wait_connected()
        return stream

    def sql(self, statement: str, *args: Any) -> list[Any]:
        return db_fetch(self.url, statement, *args)

    def sql_insert(self, org: str, status: str = "received", amount: str = "10.00") -> str:
        self.counter += 1
        rows = self.sql(f"INSERT INTO {self.sql_name} (org_uid, number, status, amount) "
                        "VALUES ($1, $2, $3, $4) RETURNING uid",
                        uuid.UUID(org), f"SQL-{self.counter}", status, amount)
        return str(rows[0]["uid"])

    def rest_insert(self, caller: Caller | None = None, table: str = "invoices",
                    **values: Any) -> str:
        self.counter += 1
        body = {"number": f"REST-{self.counter}", **values}
        return str(expect((caller or self.clerk).post(self.world.rows(table), json=body),
                          201)["uid"])


@pytest.fixture
def captured(world: AppWorld, database_url: str) -> Iterator[Captured]:
    world.table("invoices", COLUMNS)
    world.table("notes", COLUMNS)  # never captured
    definition = expect(world.admin.patch(f"{world.base}/tables/invoices",
                                          json={"captureSqlWrites": True}), 200)
    org, other = world.org("Northwind"), world.org("Southwind")
    world.role("clerk", ["invoices:*", "notes:*"])
    world.role("auditor", [*READ, "notes:read_list", "notes:read"],
               redact={"invoices": ["amount"]})
    world.role("no_drafts", READ, row_policies={"invoices": {"status": {"ne": "draft"}}})
    feed = Captured(world, database_url, definition["sqlName"], org, other,
                    world.caller(org, ["clerk"]))
    yield feed
    for stream in feed.streams:
        stream.close()


def test_admin_turns_capture_on_and_off_and_the_definition_names_the_sql_table(
        world: AppWorld) -> None:
    created = world.table("ledger", COLUMNS)
    assert created["captureSqlWrites"] is False
    assert created["sqlName"].startswith('"app_') and created["sqlName"].endswith('"."ledger"')
    on = expect(world.admin.patch(f"{world.base}/tables/ledger", json={"captureSqlWrites": True}),
                200)
    assert on["captureSqlWrites"] is True and on["sqlName"] == created["sqlName"]
    assert expect(world.admin.get(f"{world.base}/tables/ledger"), 200)["captureSqlWrites"] is True
    off = expect(world.admin.patch(f"{world.base}/tables/ledger",
                                   json={"captureSqlWrites": False}), 200)
    assert off["captureSqlWrites"] is False
    expect(world.admin.patch(f"{world.base}/tables/ledger", json={"captureSqlWrites": "yes"}),
           422, "VALIDATION_FAILED")


def test_sql_insert_update_and_delete_reach_subscribers_judged_and_redacted(
        captured: Captured) -> None:
    w = captured.world
    auditor = captured.subscribe(w.caller(captured.org, ["auditor"]))
    viewer = captured.subscribe(w.caller(captured.org, ["no_drafts"]))
    outsider = captured.subscribe(w.caller(captured.other_org, ["auditor"]))

    uid = captured.sql_insert(captured.org, status="draft", amount="99.50")
    inserted = auditor.wait_for_change(uid, "insert")
    assert inserted.data["row"]["amount"] == "[redacted]"
    assert inserted.data["row"]["status"] == "draft"
    captured.sql(f"UPDATE {captured.sql_name} SET status = 'paid' WHERE uid = $1", uuid.UUID(uid))
    updated = auditor.wait_for_change(uid, "update")
    assert updated.data["row"]["status"] == "paid" and updated.pos > inserted.pos
    viewer.wait_for_change(uid, "update")  # no longer a draft: the viewer may read it now
    captured.sql(f"DELETE FROM {captured.sql_name} WHERE uid = $1", uuid.UUID(uid))
    deleted = auditor.wait_for_change(uid, "delete")
    assert deleted.data == {"op": "delete", "table": "invoices", "rowUid": uid}
    viewer.wait_for_change(uid, "delete")  # judged as it stood: paid, so visible

    # A draft deleted by SQL is judged on its old image: the viewer never hears of it.
    draft = captured.sql_insert(captured.org, status="draft")
    captured.sql(f"DELETE FROM {captured.sql_name} WHERE uid = $1", uuid.UUID(draft))
    auditor.wait_for_change(draft, "delete")
    fence = captured.sql_insert(captured.org)
    viewer.wait_for_change(fence, "insert")
    assert [f.op for f in viewer.changes()] == ["update", "delete", "insert"]
    assert not any(f.data.get("row", {}).get("amount") not in (None, "[redacted]")
                   for f in auditor.changes())

    other_fence = captured.sql_insert(captured.other_org)
    outsider.wait_for_change(other_fence, "insert")
    assert [f.row_uid for f in outsider.changes()] == [other_fence]


def test_sql_writes_to_an_uncaptured_table_stay_silent(captured: Captured) -> None:
    w = captured.world
    auditor = w.caller(captured.org, ["auditor"])
    stream = captured.subscribe(auditor, table="notes")
    notes = captured.sql_name.replace('"invoices"', '"notes"')
    captured.sql(f"INSERT INTO {notes} (uid, org_uid, number) VALUES ($1, $2, 'quiet')",
                 uuid.uuid4(), uuid.UUID(captured.org))
    fence = captured.rest_insert(table="notes")
    stream.wait_for_change(fence, "insert")
    assert [f.row_uid for f in stream.changes()] == [fence]


def test_a_platform_write_to_a_captured_table_arrives_once(captured: Captured) -> None:
    stream = captured.subscribe(captured.world.caller(captured.org, ["auditor"]))
    uid = captured.rest_insert()
    stream.wait_for_change(uid, "insert")  # rows are re-read at delivery: one step at a time
    expect(captured.clerk.patch(f"{captured.world.rows('invoices')}/{uid}",
                                json={"status": "paid"}), 200)
    stream.wait_for_change(uid, "update")
    expect(captured.clerk.delete(f"{captured.world.rows('invoices')}/{uid}"), 204)
    stream.wait_for_change(uid, "delete")
    fence = captured.sql_insert(captured.org)
    stream.wait_for_change(fence, "insert")
    assert [(f.op, f.row_uid) for f in stream.changes()] == [
        ("insert", uid), ("update", uid), ("delete", uid), ("insert", fence)]
    logged = captured.sql("SELECT op FROM authoric.changes WHERE row_uid = $1 ORDER BY pos",
                          uuid.UUID(uid))
    assert [r["op"] for r in logged] == ["insert", "update", "delete"]


def test_a_5000_row_sql_update_sends_one_resync_per_org_it_touched(captured: Captured) -> None:
    w = captured.world
    mine = captured.subscribe(w.caller(captured.org, ["auditor"]))
    theirs = captured.subscribe(w.caller(captured.other_org, ["auditor"]))
    # 5,000 rows in one org by one statement: itself more than 1,000, so one resync.
    captured.sql(f"INSERT INTO {captured.sql_name} (org_uid, number) "
                 "SELECT $1, 'BULK-' || g FROM generate_series(1, 5000) g",
                 uuid.UUID(captured.org))
    first = mine.wait_for(lambda f: f.event == "resync")
    assert first.data == {"reason": "bulk_change", "table": "invoices"}
    captured.sql(f"UPDATE {captured.sql_name} SET status = 'paid' WHERE org_uid = $1",
                 uuid.UUID(captured.org))
    mine.wait_until(lambda fs: len([f for f in fs if f.event == "resync"]) == 2)
    fence = captured.sql_insert(captured.org)
    mine.wait_for_change(fence, "insert")
    resyncs = [f for f in mine.events() if f.event == "resync"]
    assert len(resyncs) == 2 and resyncs[1].pos > first.pos
    assert [f.row_uid for f in mine.changes()] == [fence]
    other_fence = captured.sql_insert(captured.other_org)
    theirs.wait_for_change(other_fence, "insert")
    assert not [f for f in theirs.events() if f.event == "resync"]
    bulk = captured.sql("SELECT count(*) AS n FROM authoric.changes WHERE op = 'bulk' "
                        "AND org_uid = $1", uuid.UUID(captured.org))
    assert bulk[0]["n"] == 2


def test_commit_order_holds_with_sql_and_platform_writers_interleaved(captured: Captured) -> None:
    w = captured.world
    stream = captured.subscribe(w.caller(captured.org, ["auditor"]))
    rounds = 40

    async def sql_writer(conn_count: int) -> list[str]:
        conns = [await asyncpg.connect(captured.url) for _ in range(conn_count)]
        try:
            async def one(conn: asyncpg.Connection, i: int) -> list[str]:
                out = []
                for n in range(rounds):
                    async with conn.transaction():
                        uid = await conn.fetchval(
                            f"INSERT INTO {captured.sql_name} (org_uid, number) "
                            "VALUES ($1, $2) RETURNING uid", uuid.UUID(captured.org),
                            f"C{i}-{n}")
                        # a second statement in the same transaction: one commit, two changes
                        await conn.execute(f"UPDATE {captured.sql_name} SET status = 'seen' "
                                           "WHERE uid = $1", uid)
                    out.append(str(uid))
                return out
            results = await asyncio.gather(*(one(c, i) for i, c in enumerate(conns)))
            return [u for r in results for u in r]
        finally:
            for c in conns:
                await c.close()

    sql_uids: list[str] = []
    thread = threading.Thread(target=lambda: sql_uids.extend(asyncio.run(sql_writer(3))))
    thread.start()
    rest_uids = [captured.rest_insert() for _ in range(rounds)]
    thread.join()
    expected = set(sql_uids) | set(rest_uids)
    stream.wait_until(lambda fs: expected <= {f.row_uid for f in fs if f.is_change})
    ids = stream.ids()
    assert strictly_increasing(ids)
    assert len(ids) == len(set(ids))
    # Resuming from the middle replays exactly what came after, in the same order.
    middle = ids[len(ids) // 2]
    resumed = captured.subscribe(w.caller(captured.org, ["auditor"]),
                                 last_event_id=str(middle))
    tail = [i for i in ids if i > middle]
    resumed.wait_until(lambda fs: [f.pos for f in fs if f.is_change][:len(tail)] == tail)


def test_a_sql_truncate_sends_a_resync_to_every_org(captured: Captured) -> None:
    w = captured.world
    mine = captured.subscribe(w.caller(captured.org, ["auditor"]))
    theirs = captured.subscribe(w.caller(captured.other_org, ["auditor"]))
    captured.sql_insert(captured.org)
    captured.sql(f"TRUNCATE {captured.sql_name}")
    for stream in (mine, theirs):
        resync = stream.wait_for(lambda f: f.event == "resync")
        assert resync.data == {"reason": "bulk_change", "table": "invoices"}
    assert expect(captured.clerk.get(w.rows("invoices")), 200)["items"] == []
