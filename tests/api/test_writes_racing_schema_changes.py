"""Writes in a transaction racing the operator's column swap (security round four, finding 1,
the transaction path): a statement planned for one catalog version never runs against another.

The race is made deterministic with a lock the test holds on the table: the operator's swap
queues behind it (its version already bumped, not yet committed), the member's bulk write
reads its facts (the old version) and queues behind the swap, and the test lets go. The swap
commits first; the write then runs on the swapped columns. Planned for the old version, its
row policy (`status` is not `hidden`) would read the column now called `status`, which holds
the old `tag` values, and so change the hidden rows too. Guarded, it plans again: it changes
exactly the rows the member may see, and answers 200.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import httpx

from tests.scenario import AppWorld, Caller, expect
from tests.sse import wait_for_lock_waiter


async def _race(database_url: str, relation: str, swap: Any, write: Any) -> tuple[Any, Any]:
    """`swap` and then `write` (blocking HTTP calls), each queued behind a lock this holds on
    `relation`, released once both wait: the swap commits before the write's first statement
    on the table, and after the write read its facts."""
    conn = await asyncpg.connect(database_url)
    try:
        holding = conn.transaction()
        await holding.start()
        await conn.execute(f"LOCK TABLE {relation} IN ACCESS SHARE MODE")
        swapped = asyncio.ensure_future(asyncio.to_thread(swap))
        await wait_for_lock_waiter(conn, relation, "AccessExclusiveLock")
        written = asyncio.ensure_future(asyncio.to_thread(write))
        await wait_for_lock_waiter(conn, relation, "RowExclusiveLock")
        await holding.rollback()
        return await swapped, await written
    finally:
        await conn.close()


def test_a_screened_members_bulk_write_racing_a_swap_changes_only_rows_it_may_see(
        world: AppWorld, database_url: str, http: httpx.Client) -> None:
    world.table("vendors", [{"name": "status", "type": "text"},
                            {"name": "tag", "type": "text"},
                            {"name": "note", "type": "text"}])
    org = world.org("North")
    world.role("screened", ["vendors:*"],
               row_policies={"vendors": {"status": {"ne": "hidden"}}})
    world.role("writer", ["vendors:*"])
    writer = world.caller(org, ["writer"])
    screened = world.caller(org, ["screened"])
    shown, hidden = [], []
    for i in range(4):
        row = expect(writer.post(world.rows("vendors"), json={
            "status": "shown" if i < 2 else "hidden", "tag": f"tag-{i}", "note": "before"}), 201)
        (shown if i < 2 else hidden).append(row["uid"])
    app_uid = uuid.UUID(expect(world.admin.get(world.base), 200)["uid"])
    relation = f'"app_{app_uid.hex}"."vendors"'
    admin = Caller(httpx.Client(base_url=world.server.url, timeout=60), world.admin.token)
    member = Caller(httpx.Client(base_url=world.server.url, timeout=60), screened.token)
    try:
        swap, write = asyncio.run(_race(
            _asyncpg_url(database_url), relation,
            lambda: admin.patch(f"{world.base}/tables/vendors",
                                json={"renameColumns": {"status": "tag", "tag": "status"}}),
            lambda: member.patch(world.rows("vendors"), params={"note": "before"},
                                 json={"set": {"note": "after"}})))
    finally:
        admin.client.close()
        member.client.close()
    expect(swap, 200)
    # The write ran after the swap: the policy follows the column (now `tag`), so the
    # member changed its two rows, never the hidden ones.
    assert expect(write, 200) == {"count": 2}
    rows = expect(writer.get(world.rows("vendors"), params={"limit": 10}), 200)["items"]
    notes = {r["uid"]: r["note"] for r in rows}
    assert {notes[uid] for uid in shown} == {"after"}
    assert {notes[uid] for uid in hidden} == {"before"}, "a hidden row was written"


def _asyncpg_url(database_url: str) -> str:
    return database_url.replace("postgresql+asyncpg://", "postgresql://")
