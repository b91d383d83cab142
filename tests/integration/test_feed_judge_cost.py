"""The live feed's judge costs what the classes involved cost, and runs as REST's reads do.

The hub judges each org of a batch with one statement on the request path's pool (autocommit,
SQL text compiled once per org and class set, then only filled), and looks only at the
classes of the batch's orgs. The frames must be exactly those of the statement built and run
through SQLAlchemy (the replay's way): same rows, same redaction, same deletes judged on the
row as it stood."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Hashable
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from authoric.catalog.snapshot import AppSnapshot, load_snapshot
from authoric.changes import reader
from authoric.db.engine import async_url, libpq_url
from authoric.plan.runner import open_pool
from authoric.policy.principal import Principal
from authoric.realtime import judge as judging
from authoric.realtime.judge import Frame, Memo, ReadClass, judge, judge_orgs
from authoric.realtime.source import Change
from tests.scenario import AppWorld, expect

ROLES = ("reader", "auditor", "field")


def build(world: AppWorld, orgs: int) -> tuple[str, list[str], dict[str, list[str]]]:
    """An app with `notes` (reader: all; auditor: `secret` redacted; field: no drafts, redacted),
    `orgs` orgs, and rows in each (one in three a draft); (app uid, org uids, rows per org)."""
    world.table("notes", [{"name": "title", "type": "text"}, {"name": "status", "type": "text"},
                          {"name": "secret", "type": "text"}])
    read = ["notes:read_list", "notes:read"]
    world.role("writer", ["notes:*"])
    world.role("reader", read)
    world.role("auditor", read, redact={"notes": ["secret"]})
    world.role("field", read, row_policies={"notes": {"status": {"ne": "draft"}}},
               redact={"notes": ["secret"]})
    org_uids, rows = [], {}
    for n in range(orgs):
        org = world.org(f"Org{n}")
        writer = world.caller(org, ["writer"])
        org_uids.append(org)
        rows[org] = [expect(writer.post(world.rows("notes"), json={
            "title": f"t{i}", "status": "draft" if i % 3 == 0 else "open",
            "secret": f"s{i}"}), 201)["uid"] for i in range(6)]
    return str(expect(world.admin.get(world.base), 200)["uid"]), org_uids, rows


def classes_of(snapshot: AppSnapshot, org: str) -> list[ReadClass]:
    return [ReadClass((org, role), Principal(snapshot.uid, uuid.uuid4(), uuid.UUID(org), None,
                                             (role,))) for role in ROLES]


async def old_images(conn: Any, snapshot: AppSnapshot, uids: list[str]) -> dict[str, Any]:
    """Rows as the change log stores a delete's old row (`to_jsonb` of the row)."""
    table = snapshot.table("notes").table
    result = await conn.execute(text(
        f'SELECT uid, to_jsonb(t) AS img FROM "{table.schema}"."{table.name}" t '
        "WHERE uid = ANY(:uids)"), {"uids": [uuid.UUID(u) for u in uids]})
    return {str(r.uid): r.img for r in result}


def changes_for(snapshot: AppSnapshot, org: str, uids: list[str], start: int,
                images: dict[str, Any] | None = None) -> list[Change]:
    out = []
    for i, uid in enumerate(uids):
        op = "delete" if images else ("insert" if i % 2 else "update")
        out.append(Change(start + i, snapshot.uid, "notes", op, uuid.UUID(uid), uuid.UUID(org),
                          images[uid] if images else None))
    return out


async def deleted(world: AppWorld, conn: Any, snapshot: AppSnapshot, org: str, uids: list[str],
                  start: int) -> list[Change]:
    """`uids` deleted, as the change log records them: delete changes
    carrying each row's old image, positions from `start`."""
    images = await old_images(conn, snapshot, uids)
    # By the operator: a new member would move the app's version past `snapshot`, and the
    # judge reads only at the version it was planned for.
    for uid in uids:
        expect(world.admin.delete(f"{world.base}/tables/notes/rows/{uid}"), 204)
    return changes_for(snapshot, org, uids, start, images)


def run(database_url: str, app_uid: str, body: Any) -> Any:
    async def main() -> Any:
        engine = create_async_engine(async_url(database_url))
        pool = await open_pool(libpq_url(database_url), 2, {})
        try:
            async with engine.connect() as conn, pool.acquire() as raw:
                snapshot = await load_snapshot(conn, uuid.UUID(app_uid))

                async def connect() -> Any:
                    return conn

                return await body(snapshot, conn, raw, connect)
        finally:
            await pool.close()
            await engine.dispose()

    return asyncio.run(main())


def data(frames: dict[Hashable, list[Frame]]) -> dict[Hashable, list[tuple[int, Any]]]:
    return {key: [(f.pos, json.loads(f.data.decode().split("data: ", 1)[1])) for f in items]
            for key, items in frames.items()}


def test_the_hub_s_judge_on_the_pool_sends_exactly_the_frames_of_the_statement_sqlalchemy_runs(
        world: AppWorld, database_url: str) -> None:
    app_uid, orgs, rows = build(world, 1)
    org = orgs[0]

    async def body(snapshot: AppSnapshot, conn: Any, raw: Any, connect: Any) -> Any:
        table = snapshot.table("notes")
        classes = classes_of(snapshot, org)
        live = changes_for(snapshot, org, rows[org][:3], 1)
        batch = live + await deleted(world, conn, snapshot, org, rows[org][3:], 10)
        by_sqlalchemy = data(await judge(conn, snapshot, table, classes, batch))
        by_pool = data(await judge_orgs(connect, snapshot, table, {uuid.UUID(org): classes},
                                        batch, Memo(), raw))
        return by_sqlalchemy, by_pool

    by_sqlalchemy, by_pool = run(database_url, app_uid, body)
    assert by_pool == by_sqlalchemy
    reader, auditor, field = (by_pool[(org, role)] for role in ROLES)
    # Rows 0 and 3 are drafts; 3, 4 and 5 are deleted, judged on their old images.
    assert [pos for pos, _ in reader] == [1, 2, 3, 10, 11, 12]
    assert [pos for pos, _ in field] == [2, 3, 11, 12]
    assert {e["row"]["secret"] for _, e in reader if "row" in e} == {"s0", "s1", "s2"}
    assert {e["row"]["secret"] for _, e in auditor if "row" in e} == {"[redacted]"}
    assert [e["op"] for _, e in field] == ["insert", "update", "delete", "delete"]


def test_an_org_s_judge_statement_is_built_once_then_only_filled_batch_after_batch(
        world: AppWorld, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    app_uid, orgs, rows = build(world, 2)
    built: list[int] = []
    real = judging._statement

    def counting(*args: Any) -> Any:
        built.append(1)
        return real(*args)

    monkeypatch.setattr(judging, "_statement", counting)

    async def body(snapshot: AppSnapshot, conn: Any, raw: Any, connect: Any) -> Any:
        table = snapshot.table("notes")
        classes = {uuid.UUID(o): classes_of(snapshot, o) for o in orgs}
        memo = Memo()
        seen = []
        for round_ in range(3):
            for org in orgs:
                uid = rows[org][(1, 2, 4)[round_]]  # never a draft: every class sees it
                frames = await judge_orgs(connect, snapshot, table, classes,
                                          changes_for(snapshot, org, [uid], 100 + round_), memo,
                                          raw)
                seen.append({key: len(items) for key, items in frames.items()})
        return seen, memo.sent

    seen, sent = run(database_url, app_uid, body)
    assert len(built) == 2  # one statement per org (same classes, same shape), built once
    assert sent == 6  # and sent once per batch
    for counts, org in zip(seen, orgs * 3, strict=True):
        assert counts == {(org, role): 1 for role in ROLES}


def test_a_batch_of_one_org_is_judged_with_that_org_s_classes_only(
        world: AppWorld, database_url: str) -> None:
    app_uid, orgs, rows = build(world, 3)

    async def body(snapshot: AppSnapshot, conn: Any, raw: Any, connect: Any) -> Any:
        table = snapshot.table("notes")
        classes = {uuid.UUID(o): classes_of(snapshot, o) for o in orgs}
        memo = Memo()
        frames = await judge_orgs(connect, snapshot, table, classes,
                                  changes_for(snapshot, orgs[1], rows[orgs[1]][1:2], 7), memo,
                                  raw)
        return set(frames), set(memo.decisions)

    looked_at, decided = run(database_url, app_uid, body)
    assert looked_at == decided == {(orgs[1], role) for role in ROLES}


def test_the_relay_s_read_carries_each_entry_s_app_version_as_of_that_read(
        world: AppWorld, database_url: str) -> None:
    app_uid, _, _ = build(world, 1)

    async def read() -> tuple[list[Change], int]:
        conn = await asyncpg.connect(libpq_url(database_url))
        try:
            deadline = time.monotonic() + 60
            while True:  # the sequencer stamps the entries a moment after their commit
                entries = [c for c in await reader.changes_after(conn, 0, 100_000)
                           if c.app_uid == uuid.UUID(app_uid)]
                if len(entries) >= 6 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            version = await conn.fetchval("SELECT version FROM authoric.apps WHERE uid = $1",
                                          uuid.UUID(app_uid))
            return entries, int(version)
        finally:
            await conn.close()

    before, version = asyncio.run(read())
    assert len(before) == 6 and {c.version for c in before} == {version}
    world.role("reader", ["notes:read_list"])  # bumps the app's version
    after, bumped = asyncio.run(read())
    assert bumped > version and {c.version for c in after} == {bumped}


def test_a_table_dropped_and_made_again_is_judged_on_its_new_row_type(
        world: AppWorld, database_url: str) -> None:
    """The pool keeps prepared statements by their text; a delete's judge reads old images as
    the table's row type, which a prepared statement does not follow when the type changes."""
    app_uid, orgs, rows = build(world, 1)
    org = orgs[0]

    async def body(snapshot: AppSnapshot, conn: Any, raw: Any, connect: Any) -> Any:
        classes = {uuid.UUID(org): classes_of(snapshot, org)}
        images = await old_images(conn, snapshot, rows[org][1:2])
        for pos in range(1, 8):  # past PostgreSQL's switch to a generic plan
            frames = await judge_orgs(connect, snapshot, snapshot.table("notes"), classes,
                                      changes_for(snapshot, org, rows[org][1:2], pos, images),
                                      Memo(), raw)
            assert len(frames[(org, "reader")]) == 1
        await conn.rollback()
        expect(world.admin.delete(f"{world.base}/tables/notes"), 204)
        world.table("notes", [{"name": "title", "type": "integer"},  # same names, a new type
                              {"name": "status", "type": "text"},
                              {"name": "secret", "type": "text"}])
        again = await load_snapshot(conn, uuid.UUID(app_uid))
        assert again.version > snapshot.version
        image = {**images[rows[org][1]], "title": 7}
        frames = await judge_orgs(connect, again, again.table("notes"),
                                  {uuid.UUID(org): classes_of(again, org)},
                                  [Change(9, again.uid, "notes", "delete", uuid.UUID(rows[org][1]),
                                          uuid.UUID(org), image)], Memo(), raw)
        return {key: len(items) for key, items in frames.items()}

    assert run(database_url, app_uid, body) == {(org, role): 1 for role in ROLES}


def test_classes_that_read_a_row_alike_share_one_encoded_frame_and_others_get_their_own(
        world: AppWorld, database_url: str) -> None:
    # The auditor and the field clerk both redact `secret`: an open row reads the same to
    # both, so it is rendered and encoded once for them; the reader sees `secret`.
    app_uid, orgs, rows = build(world, 1)
    org = orgs[0]

    async def body(snapshot: AppSnapshot, conn: Any, raw: Any, connect: Any) -> Any:
        table = snapshot.table("notes")
        batch = [*changes_for(snapshot, org, rows[org][1:2], 1),
                 *await deleted(world, conn, snapshot, org, rows[org][4:5], 2)]
        return await judge_orgs(connect, snapshot, table,
                                {uuid.UUID(org): classes_of(snapshot, org)}, batch, Memo(), raw)

    frames = run(database_url, app_uid, body)
    (r_row, r_del), (a_row, a_del), (f_row, f_del) = (frames[(org, role)] for role in ROLES)
    assert a_row is f_row and b"[redacted]" in a_row.data
    assert r_row is not a_row and b'"secret":"s1"' in r_row.data
    assert r_del is a_del is f_del and b'"op":"delete"' in r_del.data


def test_a_row_whose_policy_column_is_null_reaches_the_reader_but_not_the_field_clerk(
        world: AppWorld, database_url: str) -> None:
    # The field clerk's policy (`status` not `draft`) is NULL over a NULL status: a GET
    # shows the row to the reader only, and so does the feed.
    app_uid, orgs, _ = build(world, 1)
    org = orgs[0]
    writer = world.caller(org, ["writer"])
    row = expect(writer.post(world.rows("notes"), json={"title": "t", "status": None}), 201)
    field = world.caller(org, ["field"])
    expect(field.get(f"{world.rows('notes')}/{row['uid']}"), 404)

    async def body(snapshot: AppSnapshot, conn: Any, raw: Any, connect: Any) -> Any:
        return await judge_orgs(connect, snapshot, snapshot.table("notes"),
                                {uuid.UUID(org): classes_of(snapshot, org)},
                                changes_for(snapshot, org, [row["uid"]], 1), Memo(), raw)

    frames = run(database_url, app_uid, body)
    assert {role: len(frames[(org, role)]) for role in ROLES} == {
        "reader": 1, "auditor": 1, "field": 0}


def test_an_org_with_two_thousand_read_classes_is_judged_in_one_statement(
        world: AppWorld, database_url: str) -> None:
    # A per-user policy makes a class per subscribing user; PostgreSQL takes at most 1,664
    # columns in a SELECT, so the classes' flags cannot be a column each.
    app_uid, orgs, rows = build(world, 1)
    org = orgs[0]

    async def body(snapshot: AppSnapshot, conn: Any, raw: Any, connect: Any) -> Any:
        principal = classes_of(snapshot, org)[2].principal  # the field clerk
        classes = [ReadClass((org, "field", n), principal) for n in range(2000)]
        memo = Memo()
        batch = [*changes_for(snapshot, org, rows[org][:2], 1),
                 *await deleted(world, conn, snapshot, org, rows[org][4:5], 3)]
        frames = await judge_orgs(connect, snapshot, snapshot.table("notes"),
                                  {uuid.UUID(org): classes}, batch, memo, raw)
        return {tuple(f.pos for f in items) for items in frames.values()}, len(frames), memo.sent

    seen, judged, sent = run(database_url, app_uid, body)
    # Row 0 is a draft the field clerk may not see; row 1 is open; row 4 was open.
    assert (seen, judged, sent) == ({(2, 3)}, 2000, 1)
