"""Positions follow commit order, not insert order; a rolled-back write announces nothing.

A writer's transaction records its change-log row with `pos` NULL; positions are stamped
after commit. These tests hold a transaction open after its log row exists (a raw asyncpg
transaction doing exactly what `db/changelog.py` does) while REST writes commit, and check
that a client resuming from any id it was sent still receives the late commit.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
from uuid6 import uuid7

from tests.scenario import AppWorld, Caller, expect
from tests.sse import SSEClient, db_value, strictly_increasing


@dataclass
class Ledger:
    world: AppWorld
    app_uid: uuid.UUID
    org: str
    clerk: Caller
    database_url: str
    streams: list[SSEClient]

    @property
    def schema(self) -> str:
        return f"app_{self.app_uid.hex}"

    def subscribe(self, **kw: Any) -> SSEClient:
        stream = SSEClient(self.world.server.url, f"{self.world.rows('invoices')}/subscribe",
                           self.clerk.token, **kw)
        self.streams.append(stream)
        assert stream.status_code == 200, stream.body
        stream.wait_connected()
        return stream

    def insert(self, **values: Any) -> dict[str, Any]:
        body = {"number": f"N-{uuid.uuid4().hex[:8]}", **values}
        return dict(expect(self.clerk.post(self.world.rows("invoices"), json=body), 201))

    def log_rows(self) -> int:
        return int(db_value(self.database_url, "SELECT count(*) FROM authoric.changes "
                                               "WHERE app_uid = $1", self.app_uid))

    async def held_insert(self, conn: asyncpg.Connection, number: str) -> tuple[uuid.UUID, int]:
        """In `conn`'s open transaction: a row and its log row (pos NULL), as the write service
        does. Returns the row uid and the log row's id (its insert order)."""
        uid = uuid7()
        org = uuid.UUID(self.org)
        await conn.execute(f'INSERT INTO "{self.schema}"."invoices" (uid, org_uid, number, status) '
                           "VALUES ($1, $2, $3, 'open')", uid, org, number)
        log_id = await conn.fetchval(
            "INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid) "
            "VALUES ($1, 'invoices', 'insert', $2, $3) RETURNING id", self.app_uid, uid, org)
        return uid, int(log_id)


@pytest.fixture
def ledger(world: AppWorld, database_url: str) -> Iterator[Ledger]:
    world.table("invoices", [{"name": "number", "type": "text", "required": True, "unique": True},
                             {"name": "status", "type": "text", "default": "open"}])
    org = world.org("Northwind")
    world.role("clerk", ["invoices:*"], row_policies={"invoices": {"status": {"ne": "closed"}}})
    app = expect(world.admin.get(world.base), 200)
    ledger = Ledger(world, uuid.UUID(app["uid"]), org, world.caller(org, ["clerk"]), database_url, [])
    yield ledger
    for stream in ledger.streams:
        stream.close()


async def test_a_transaction_committing_after_a_later_write_is_still_received_on_resume(
        ledger: Ledger) -> None:
    live = await asyncio.to_thread(ledger.subscribe)
    conn = await asyncpg.connect(ledger.database_url)
    try:
        held = conn.transaction()
        await held.start()
        held_uid, held_id = await ledger.held_insert(conn, "HELD-1")

        # Meanwhile a REST write commits (its log row is inserted after ours) and is delivered.
        later = await asyncio.to_thread(ledger.insert)
        later_id = db_value(ledger.database_url, "SELECT id FROM authoric.changes WHERE row_uid = $1",
                            uuid.UUID(later["uid"]))
        assert held_id < later_id  # the hard case: inserted first, committed last
        p = (await asyncio.to_thread(live.wait_for_change, later["uid"])).pos

        # A client resuming from P now sees nothing yet: the held change is not committed.
        early = await asyncio.to_thread(ledger.subscribe, last_event_id=p)
        await held.commit()
    finally:
        await conn.close()

    frame = await asyncio.to_thread(live.wait_for_change, str(held_uid), "insert")
    assert frame.pos > p
    resumed = await asyncio.to_thread(ledger.subscribe, last_event_id=p)
    got = await asyncio.to_thread(resumed.wait_for_change, str(held_uid), "insert")
    assert got.pos == frame.pos
    assert [f.row_uid for f in resumed.changes()] == [str(held_uid)]
    # the client that resumed while the transaction was open receives it live
    assert (await asyncio.to_thread(early.wait_for_change, str(held_uid))).pos == frame.pos
    assert strictly_increasing(live.ids())


async def test_several_transactions_committed_out_of_insert_order_each_land_after_what_was_sent(
        ledger: Ledger) -> None:
    live = await asyncio.to_thread(ledger.subscribe)
    conns = [await asyncpg.connect(ledger.database_url) for _ in range(4)]
    try:
        held: list[tuple[Any, uuid.UUID]] = []
        for i, conn in enumerate(conns):
            transaction = conn.transaction()
            await transaction.start()
            uid, _ = await ledger.held_insert(conn, f"HELD-{i}")
            held.append((transaction, uid))
            rest = await asyncio.to_thread(ledger.insert)  # interleaved committed writes
            await asyncio.to_thread(live.wait_for_change, rest["uid"])
        for transaction, uid in reversed(held):  # commit in reverse insert order
            sent_before = max(live.ids())
            await transaction.commit()
            frame = await asyncio.to_thread(live.wait_for_change, str(uid))
            assert frame.pos > sent_before
            # every id sent before this commit resumes into this change
            resumed = await asyncio.to_thread(ledger.subscribe, last_event_id=sent_before)
            await asyncio.to_thread(resumed.wait_for_change, str(uid))
            resumed.close()
            rest = await asyncio.to_thread(ledger.insert)
            await asyncio.to_thread(live.wait_for_change, rest["uid"])
    finally:
        for conn in conns:
            await conn.close()
    assert strictly_increasing(live.ids())
    assert len(live.changes()) == 4 + 4 + 4


async def test_a_rolled_back_transaction_records_and_sends_nothing(ledger: Ledger) -> None:
    live = await asyncio.to_thread(ledger.subscribe)
    before = ledger.log_rows()
    conn = await asyncpg.connect(ledger.database_url)
    try:
        transaction = conn.transaction()
        await transaction.start()
        uid, _ = await ledger.held_insert(conn, "ROLLED-BACK")
        await transaction.rollback()
    finally:
        await conn.close()
    fence = await asyncio.to_thread(ledger.insert)
    await asyncio.to_thread(live.wait_for_change, fence["uid"])
    assert str(uid) not in live.text()
    assert [f.row_uid for f in live.changes()] == [fence["uid"]]
    assert ledger.log_rows() == before + 1
    assert db_value(ledger.database_url, "SELECT count(*) FROM authoric.changes WHERE row_uid = $1",
                    uid) == 0


def test_rest_writes_that_fail_record_and_send_nothing(ledger: Ledger) -> None:
    live = ledger.subscribe()
    taken = ledger.insert(number="TAKEN")
    live.wait_for_change(taken["uid"])
    before = ledger.log_rows()
    route = ledger.world.rows("invoices")
    # a unique violation (409), a row outside the writer's row policy (403), on create and update
    expect(ledger.clerk.post(route, json={"number": "TAKEN"}), 409, "CONFLICT")
    expect(ledger.clerk.post(route, json={"number": "X-1", "status": "closed"}), 403, "FORBIDDEN")
    expect(ledger.clerk.patch(f"{route}/{taken['uid']}", json={"status": "closed"}), 403,
           "FORBIDDEN")
    expect(ledger.clerk.post(f"{route}/import", content="number,status\nX-2,open\nX-3,closed\n",
                             headers={"Content-Type": "text/csv"}), 403, "FORBIDDEN")
    assert ledger.log_rows() == before
    fence = ledger.insert()
    live.wait_for_change(fence["uid"])
    assert [f.row_uid for f in live.changes()] == [taken["uid"], fence["uid"]]
    assert expect(ledger.clerk.get(f"{route}/{taken['uid']}"), 200)["status"] == "open"
