"""`?expand=` on the feed costs statements per batch, never per row or per subscriber: the
judge re-reads a batch for every read class in one statement, and the expansion adds one
statement per expanded table and level, whatever the number of rows and classes."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

from authoric.catalog.snapshot import load_snapshot
from authoric.db.engine import async_url
from authoric.plan.request import ExpandPaths
from authoric.policy.principal import Principal
from authoric.realtime.judge import ReadClass, judge
from authoric.realtime.source import Change
from tests.scenario import AppWorld, expect


def judged(database_url: str, app_uid: str, org: str, rows: list[str],
           classes: list[tuple[tuple[str, ...], ExpandPaths]]) -> tuple[int, list[list[Any]]]:
    """(statements sent, each class's event data) for one batch of inserts of `rows`."""

    async def run() -> tuple[int, list[list[Any]]]:
        engine = create_async_engine(async_url(database_url))
        sent = [0]

        def count(*_: Any) -> None:
            sent[0] += 1

        try:
            async with engine.connect() as conn:
                snapshot = await load_snapshot(conn, uuid.UUID(app_uid))
                read = [ReadClass((roles, paths), Principal(snapshot.uid, uuid.uuid4(),
                                                            uuid.UUID(org), None, roles), paths)
                        for roles, paths in classes]
                changes = [Change(i + 1, snapshot.uid, "invoices", "insert", uuid.UUID(uid),
                                  uuid.UUID(org), None) for i, uid in enumerate(rows)]
                event.listen(engine.sync_engine, "before_cursor_execute", count)
                frames = await judge(conn, snapshot, snapshot.table("invoices"), read, changes)
                return sent[0], [[f.data for f in frames[c.key]] for c in read]
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_a_batch_costs_one_statement_per_expanded_table_and_level_for_every_class(
        world: AppWorld, database_url: str) -> None:
    world.table("countries", [{"name": "name", "type": "text"}])
    world.table("vendors", [{"name": "name", "type": "text"},
                            {"name": "country", "type": "reference", "references": "countries"}])
    world.table("invoices", [{"name": "vendor", "type": "reference", "references": "vendors"}])
    world.role("clerk", ["*:*"])
    world.role("viewer", ["invoices:read_list", "invoices:read", "vendors:read"],
               redact={"vendors": ["name"]})
    org = world.org("North")
    clerk = world.caller(org, ["clerk"])
    country = expect(clerk.post(world.rows("countries"), json={"name": "Japan"}), 201)["uid"]
    vendors = [expect(clerk.post(world.rows("vendors"), json={
        "name": f"v{i}", "country_uid": country}), 201)["uid"] for i in range(5)]
    rows = [expect(clerk.post(world.rows("invoices"), json={
        "vendor_uid": vendors[i % 5]}), 201)["uid"] for i in range(30)]
    app_uid = str(expect(world.admin.get(world.base), 200)["uid"])
    one: ExpandPaths = (("vendor",),)
    two: ExpandPaths = (("vendor",), ("vendor", "country"))
    plain, _ = judged(database_url, app_uid, org, rows, [(("clerk",), ())])
    sent, _ = judged(database_url, app_uid, org, rows, [(("clerk",), one), (("viewer",), one)])
    assert sent == plain + 1  # vendors, for two classes and thirty rows: one statement
    sent, data = judged(database_url, app_uid, org, rows,
                        [(("clerk",), two), (("viewer",), two), (("clerk", "viewer"), two)])
    assert sent == plain + 2  # and countries, the second level: one more
    clerk_rows, viewer_rows, both_rows = ([d["row"] for d in map(_json, c)] for c in data)
    assert len(clerk_rows) == len(viewer_rows) == len(both_rows) == 30
    assert {r["expand"]["vendor"]["name"] for r in clerk_rows} == {f"v{i}" for i in range(5)}
    assert {r["expand"]["vendor"]["expand"]["country"]["name"] for r in clerk_rows} == {"Japan"}
    # Each class judged by its own roles: the viewer's vendors redacted, no countries read.
    assert {r["expand"]["vendor"]["name"] for r in viewer_rows} == {"[redacted]"}
    assert {str(r["expand"]["vendor"]["expand"]) for r in viewer_rows} == {
        "{'country': None}"}


def _json(frame: bytes) -> Any:
    return json.loads(frame.decode().split("data: ", 1)[1])
