"""Bulk update and delete (contract sections 4 and 5): `PATCH`/`DELETE /{app}/autocrud/{table}?<filter>`.

Callers: a clerk of one org, a clerk of another org, a regional clerk confined by a row
policy, a member without the permission, and subscribers of both orgs.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess
from tests.sse import SSEClient, db_fetch, db_value


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
def books(world: AppWorld) -> AppWorld:
    """Invoices in two orgs; `clerk` may do everything, `regional` only rows of region north."""
    world.table("invoices", [
        {"name": "number", "type": "text", "required": True, "unique": True},
        {"name": "status", "type": "text", "default": "received"},
        {"name": "region", "type": "text"},
        {"name": "amount", "type": "numeric"},
    ])
    world.role("clerk", ["invoices:*"])
    world.role("regional", ["invoices:*"], row_policies={"invoices": {"region": {"eq": "north"}}})
    world.role("reader", ["invoices:read_list", "invoices:read"])
    world.org("A")
    world.org("B")
    return world


def _seed(world: AppWorld, caller: Caller, prefix: str, regions: list[str]) -> list[dict[str, Any]]:
    return [expect(caller.post(world.rows("invoices"), json={
        "number": f"{prefix}-{i}", "region": region, "amount": "10.00"}), 201)
        for i, region in enumerate(regions)]


def _all(world: AppWorld, caller: Caller) -> dict[str, dict[str, Any]]:
    items = expect(caller.get(world.rows("invoices"), params={"limit": 1000}), 200)["items"]
    return {row["number"]: row for row in items}


def _app_uid(world: AppWorld) -> uuid.UUID:
    return uuid.UUID(expect(world.admin.get(f"/admin/apps/{world.name}"), 200)["uid"])


def _bulk_entries(database_url: str, world: AppWorld) -> list[Any]:
    return db_fetch(database_url, "SELECT org_uid, row_uid FROM authoric.changes "
                                  "WHERE app_uid = $1 AND op = 'bulk' ORDER BY id", _app_uid(world))


# Shape ------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
def test_clerk_sending_a_bulk_write_without_a_filter_gets_400_and_nothing_changes(
        books: AppWorld, method: str) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    _seed(books, clerk, "A", ["north", "south"])
    body: dict[str, Any] = {"json": {"set": {"status": "void"}}} if method == "PATCH" else {}
    expect(clerk.request(method, books.rows("invoices"), **body), 400, "BAD_REQUEST")
    expect(clerk.request(method, books.rows("invoices"), params={"filter": "{}"}, **body),
           400, "BAD_REQUEST")
    rows = _all(books, clerk)
    assert len(rows) == 2 and {r["status"] for r in rows.values()} == {"received"}


def test_clerk_sending_a_malformed_bulk_update_is_refused_before_anything_changes(
        books: AppWorld) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    _seed(books, clerk, "A", ["north"])
    path = books.rows("invoices")
    expect(clerk.patch(path, params={"status": "received"}, json={"status": "void"}), 422,
           "VALIDATION_FAILED")
    expect(clerk.patch(path, params={"status": "received"}, json={"set": {}}), 422,
           "VALIDATION_FAILED")
    expect(clerk.patch(path, params={"status": "received"}, json={"set": {"nope": 1}}), 422,
           "VALIDATION_FAILED")
    expect(clerk.patch(path, params={"status": "received"}, json={"set": {"amount": "lots"}}),
           422, "VALIDATION_FAILED")
    expect(clerk.patch(path, params={"status": "received"}, json={"set": {"uid": str(uuid.uuid4())}}),
           422, "VALIDATION_FAILED")
    expect(clerk.patch(path, params={"status": "received"}, json={"set": {"number": None}}),
           422, "VALIDATION_FAILED")
    expect(clerk.patch(path, params={"nope": "x"}, json={"set": {"status": "void"}}), 400,
           "BAD_REQUEST")
    expect(clerk.delete(path, params={"filter": json.dumps({"status": {"bogus": 1}})}), 400,
           "BAD_REQUEST")
    expect(clerk.patch(path, params={"status": "received"}, content=b"status=void",
                       headers={"Content-Type": "application/x-www-form-urlencoded"}),
           415, "UNSUPPORTED_MEDIA_TYPE")
    assert _all(books, clerk)["A-0"]["status"] == "received"


def test_reader_without_update_or_delete_permission_gets_403_for_bulk_writes(books: AppWorld) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    _seed(books, clerk, "A", ["north"])
    reader = books.caller(books.orgs["A"], ["reader"])
    expect(reader.patch(books.rows("invoices"), params={"status": "received"},
                        json={"set": {"status": "void"}}), 403, "FORBIDDEN")
    expect(reader.delete(books.rows("invoices"), params={"status": "received"}), 403, "FORBIDDEN")
    assert _all(books, clerk)["A-0"]["status"] == "received"


def test_clerk_bulk_writing_a_locked_table_gets_table_locked(books: AppWorld) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    _seed(books, clerk, "A", ["north"])
    expect(books.admin.patch(f"{books.base}/tables/invoices",
                             json={"operations": {"update": False, "delete": False}}), 200)
    expect(clerk.patch(books.rows("invoices"), params={"status": "received"},
                       json={"set": {"status": "void"}}), 403, "TABLE_LOCKED")
    expect(clerk.delete(books.rows("invoices"), params={"status": "received"}), 403, "TABLE_LOCKED")


# Scope ------------------------------------------------------------------------------------

def test_clerk_bulk_update_changes_only_rows_of_their_org_and_returns_the_count(
        books: AppWorld) -> None:
    clerk_a = books.caller(books.orgs["A"], ["clerk"])
    clerk_b = books.caller(books.orgs["B"], ["clerk"])
    _seed(books, clerk_a, "A", ["north", "south", "north"])
    _seed(books, clerk_b, "B", ["north", "south"])
    got = expect(clerk_a.patch(books.rows("invoices"), params={"status": "received"},
                               json={"set": {"status": "approved", "amount": "99.50"}}), 200)
    assert got == {"count": 3}
    rows_a = _all(books, clerk_a)
    assert {r["status"] for r in rows_a.values()} == {"approved"}
    assert {r["amount"] for r in rows_a.values()} == {"99.50"}
    assert all(r["updatedAt"] > r["createdAt"] for r in rows_a.values())
    rows_b = _all(books, clerk_b)
    assert {r["status"] for r in rows_b.values()} == {"received"}
    assert {r["amount"] for r in rows_b.values()} == {"10.00"}


def test_clerk_bulk_delete_removes_only_rows_of_their_org_matching_the_filter(
        books: AppWorld) -> None:
    clerk_a = books.caller(books.orgs["A"], ["clerk"])
    clerk_b = books.caller(books.orgs["B"], ["clerk"])
    _seed(books, clerk_a, "A", ["north", "south", "north"])
    _seed(books, clerk_b, "B", ["north", "south"])
    got = expect(clerk_a.delete(books.rows("invoices"),
                                params={"filter": json.dumps({"region": {"eq": "north"}})}), 200)
    assert got == {"count": 2}
    assert set(_all(books, clerk_a)) == {"A-1"}
    assert set(_all(books, clerk_b)) == {"B-0", "B-1"}
    # The same filter again matches nothing: zero, not an error.
    assert expect(clerk_a.delete(books.rows("invoices"), params={"region": "north"}), 200) == {
        "count": 0}


def test_regional_clerk_bulk_writes_touch_only_rows_their_row_policy_allows(
        books: AppWorld) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    regional = books.caller(books.orgs["A"], ["regional"])
    _seed(books, clerk, "A", ["north", "south", "north", None])  # type: ignore[list-item]
    got = expect(regional.patch(books.rows("invoices"), params={"status": "received"},
                                json={"set": {"status": "approved"}}), 200)
    assert got == {"count": 2}
    statuses = {n: r["status"] for n, r in _all(books, clerk).items()}
    assert statuses == {"A-0": "approved", "A-1": "received", "A-2": "approved", "A-3": "received"}
    got = expect(regional.delete(books.rows("invoices"), params={"amount[gte]": "0"}), 200)
    assert got == {"count": 2}
    assert set(_all(books, clerk)) == {"A-1", "A-3"}


def test_regional_clerk_bulk_update_moving_rows_outside_their_policy_gets_403_and_nothing_changes(
        books: AppWorld, database_url: str) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    regional = books.caller(books.orgs["A"], ["regional"])
    _seed(books, clerk, "A", ["north", "north", "south"])
    before = _all(books, clerk)
    expect(regional.patch(books.rows("invoices"), params={"status": "received"},
                          json={"set": {"region": "south", "status": "moved"}}), 403, "FORBIDDEN")
    assert _all(books, clerk) == before
    assert _bulk_entries(database_url, books) == []
    # Staying inside the policy is fine.
    got = expect(regional.patch(books.rows("invoices"), params={"status": "received"},
                                json={"set": {"region": "north", "status": "kept"}}), 200)
    assert got == {"count": 2}


def test_clerk_bulk_update_giving_rows_the_same_unique_value_gets_409_and_nothing_changes(
        books: AppWorld) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    _seed(books, clerk, "A", ["north", "north"])
    expect(clerk.patch(books.rows("invoices"), params={"region": "north"},
                       json={"set": {"number": "SAME"}}), 409, "CONFLICT")
    assert set(_all(books, clerk)) == {"A-0", "A-1"}


def test_clerk_bulk_delete_on_a_soft_delete_table_marks_rows_and_keeps_them_in_the_database(
        world: AppWorld, database_url: str) -> None:
    world.table("notes", [{"name": "body", "type": "text"}, {"name": "tag", "type": "text"}],
                softDelete=True)
    world.role("clerk", ["notes:*"])
    clerk = world.caller(world.org("A"), ["clerk"])
    for i, tag in enumerate(["old", "old", "new"]):
        expect(clerk.post(world.rows("notes"), json={"body": f"n{i}", "tag": tag}), 201)
    assert expect(clerk.delete(world.rows("notes"), params={"tag": "old"}), 200) == {"count": 2}
    listed = expect(clerk.get(world.rows("notes")), 200)["items"]
    assert [r["body"] for r in listed] == ["n2"]
    schema = f"app_{_app_uid(world).hex}"
    stored = db_fetch(database_url, f'SELECT body, deleted_at IS NOT NULL AS gone '
                                    f'FROM "{schema}"."notes" ORDER BY body')
    assert [(r["body"], r["gone"]) for r in stored] == [("n0", True), ("n1", True), ("n2", False)]
    # Already marked rows are not marked (or counted) again, nor updated in bulk.
    assert expect(clerk.delete(world.rows("notes"), params={"tag": "old"}), 200) == {"count": 0}
    assert expect(clerk.patch(world.rows("notes"), params={"tag": "old"},
                              json={"set": {"body": "back"}}), 200) == {"count": 0}


# Events -----------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
def test_clerk_bulk_write_sends_one_resync_to_subscribers_of_their_org_and_none_to_other_orgs(
        books: AppWorld, database_url: str, method: str) -> None:
    clerk_a = books.caller(books.orgs["A"], ["clerk"])
    clerk_b = books.caller(books.orgs["B"], ["clerk"])
    _seed(books, clerk_a, "A", ["north", "north", "south"])
    _seed(books, clerk_b, "B", ["north"])
    url, path = books.server.url, f"{books.rows('invoices')}/subscribe"
    with SSEClient(url, path, clerk_a.token) as feed_a, SSEClient(url, path, clerk_b.token) as feed_b:
        feed_a.wait_connected()
        feed_b.wait_connected()
        body: dict[str, Any] = {"json": {"set": {"status": "approved"}}} if method == "PATCH" else {}
        got = expect(clerk_a.request(method, books.rows("invoices"), params={"region": "north"},
                                     **body), 200)
        assert got == {"count": 2}
        # Markers written after the bulk write: each feed delivers in log order, so once a
        # marker arrives, anything about the bulk write has arrived before it.
        marker_a = expect(clerk_a.post(books.rows("invoices"), json={"number": "A-m"}), 201)
        marker_b = expect(clerk_b.post(books.rows("invoices"), json={"number": "B-m"}), 201)
        feed_a.wait_for_change(marker_a["uid"], "insert")
        feed_b.wait_for_change(marker_b["uid"], "insert")
        events_a = [f for f in feed_a.events() if f.event != "connected"]
        events_b = [f for f in feed_b.events() if f.event != "connected"]
    assert [(f.event, f.data) for f in events_a] == [
        ("resync", {"reason": "bulk_change", "table": "invoices"}), (None, events_a[1].data)]
    assert events_a[0].pos < events_a[1].pos
    assert [f.op for f in events_b] == ["insert"] and events_b[0].row_uid == marker_b["uid"]
    entries = _bulk_entries(database_url, books)
    assert [str(e["org_uid"]) for e in entries] == [books.orgs["A"]]
    assert entries[0]["row_uid"] is None


def test_clerk_bulk_write_that_matches_nothing_records_no_change(
        books: AppWorld, database_url: str) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    _seed(books, clerk, "A", ["north"])
    assert expect(clerk.patch(books.rows("invoices"), params={"region": "west"},
                              json={"set": {"status": "x"}}), 200) == {"count": 0}
    assert expect(clerk.delete(books.rows("invoices"), params={"region": "west"}), 200) == {
        "count": 0}
    assert _bulk_entries(database_url, books) == []


def test_refused_bulk_write_leaves_no_entry_in_the_change_log(
        books: AppWorld, database_url: str) -> None:
    clerk = books.caller(books.orgs["A"], ["clerk"])
    _seed(books, clerk, "A", ["north", "north"])
    before = db_value(database_url, "SELECT count(*) FROM authoric.changes WHERE app_uid = $1",
                      _app_uid(books))
    expect(clerk.patch(books.rows("invoices"), params={"region": "north"},
                       json={"set": {"number": "dup"}}), 409, "CONFLICT")
    after = db_value(database_url, "SELECT count(*) FROM authoric.changes WHERE app_uid = $1",
                     _app_uid(books))
    assert after == before
