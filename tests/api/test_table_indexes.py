"""Indexes an app owner defines (contract section 2, Indexes): built without blocking the table,
with a state every replica reports, within an org, and failures that say why."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.sse import db_fetch, db_value


def physical(database_url: str, world: AppWorld, table: str) -> list[Any]:
    """The indexes PostgreSQL holds on the table, with their definitions and validity."""
    return db_fetch(database_url, """
        SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def, i.indisvalid AS valid
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        JOIN pg_class tb ON tb.oid = i.indrelid JOIN pg_namespace n ON n.oid = tb.relnamespace
        JOIN authoric.apps a ON n.nspname = 'app_' || replace(a.uid::text, '-', '')
        WHERE a.name = $1 AND tb.relname = $2 AND c.relname LIKE 'ix_%'""", world.name, table)


@pytest.fixture
def invoices(world: AppWorld) -> tuple[AppWorld, Caller, Caller]:
    """An `invoices` table, and a clerk in each of two orgs."""
    world.table("vendors", [{"name": "name", "type": "text"}])
    world.table("invoices", [{"name": "number", "type": "text"},
                             {"name": "vendor", "type": "reference", "references": "vendors"},
                             {"name": "notes", "type": "text"},
                             {"name": "amount", "type": "numeric"}])
    world.role("clerk", ["invoices:*", "vendors:*"])
    north, south = world.caller(world.org("North"), ["clerk"]), world.caller(
        world.org("South"), ["clerk"])
    return world, north, south


def test_admin_puts_an_index_that_builds_and_is_listed_in_the_table_definition(
        invoices: tuple[AppWorld, Caller, Caller], database_url: str) -> None:
    world, north, _ = invoices
    expect(north.post(world.rows("invoices"), json={"number": "A-1", "amount": "10"}), 201)
    base = f"{world.base}/tables/invoices"
    put = expect(world.admin.put(f"{base}/indexes/by_vendor",
                                 json={"columns": ["vendor", "-createdAt"]}), 202)
    assert put == {"name": "by_vendor", "columns": ["vendor", "-createdAt"], "unique": False,
                   "kind": "btree", "state": "building"}
    assert world.settled_index("invoices", "by_vendor")["state"] == "ready"
    listed = expect(world.admin.get(f"{base}/indexes"), 200)["items"]
    assert [i["name"] for i in listed] == ["by_vendor"]
    definition = expect(world.admin.get(base), 200)
    assert definition["indexes"] == [{**put, "state": "ready"}]
    # Leading with the org, the reference by its column, descending as asked, all valid.
    [index] = physical(database_url, world, "invoices")
    assert index["valid"]
    assert "(org_uid, vendor, created_at DESC NULLS LAST, uid DESC)" in index["def"]
    # A table without indexes has no `indexes` key.
    assert "indexes" not in expect(world.admin.get(f"{world.base}/tables/vendors"), 200)


def test_the_same_index_again_is_answered_as_it_stands_and_other_columns_are_409(
        invoices: tuple[AppWorld, Caller, Caller]) -> None:
    world, _, _ = invoices
    url = f"{world.base}/tables/invoices/indexes/by_number"
    expect(world.admin.put(url, json={"columns": ["number"]}), 202)
    world.settled_index("invoices", "by_number")
    again = expect(world.admin.put(url, json={"columns": ["number"]}), 202)
    assert again["state"] == "ready"
    expect(world.admin.put(url, json={"columns": ["notes"]}), 409, "CONFLICT")
    expect(world.admin.put(url, json={"columns": ["number"], "unique": True}), 409, "CONFLICT")


def test_a_unique_index_is_unique_within_an_org_and_then_refuses_a_duplicate_there(
        invoices: tuple[AppWorld, Caller, Caller]) -> None:
    world, north, south = invoices
    expect(north.post(world.rows("invoices"), json={"number": "A-1"}), 201)
    expect(south.post(world.rows("invoices"), json={"number": "A-1"}), 201)
    expect(world.admin.put(f"{world.base}/tables/invoices/indexes/number_once",
                           json={"columns": ["number"], "unique": True}), 202)
    assert world.settled_index("invoices", "number_once")["state"] == "ready"
    expect(north.post(world.rows("invoices"), json={"number": "A-1"}), 409, "CONFLICT")
    expect(north.post(world.rows("invoices"), json={"number": "A-2"}), 201)


def test_a_unique_index_over_duplicates_fails_listing_every_duplicate_and_leaves_no_index(
        invoices: tuple[AppWorld, Caller, Caller], database_url: str) -> None:
    world, north, south = invoices
    dupes = [expect(north.post(world.rows("invoices"), json={"number": "A-1"}), 201)["uid"]
             for _ in range(3)]
    expect(north.post(world.rows("invoices"), json={"number": "A-2"}), 201)
    expect(north.post(world.rows("invoices"), json={"number": None}), 201)
    expect(north.post(world.rows("invoices"), json={"number": None}), 201)  # nulls never collide
    expect(south.post(world.rows("invoices"), json={"number": "A-2"}), 201)  # another org
    expect(world.admin.put(f"{world.base}/tables/invoices/indexes/number_once",
                           json={"columns": ["number"], "unique": True}), 202)
    failed = world.settled_index("invoices", "number_once")
    assert failed["state"] == "failed"
    assert failed["error"]["code"] == "CONFLICT" and failed["error"]["message"]
    rows = failed["error"]["details"]["rows"]
    assert sorted(r["uid"] for r in rows) == sorted(dupes)
    assert all(r["column"] == "number" and r["message"] for r in rows)
    assert physical(database_url, world, "invoices") == []
    # Fixed data, the same PUT builds it again.
    for uid in dupes[1:]:
        expect(north.delete(f"{world.rows('invoices')}/{uid}"), 204)
    expect(world.admin.put(f"{world.base}/tables/invoices/indexes/number_once",
                           json={"columns": ["number"], "unique": True}), 202)
    assert world.settled_index("invoices", "number_once")["state"] == "ready"


def test_a_column_named_n_gets_its_duplicates_listed_by_a_unique_index_and_a_unique_change(
        world: AppWorld) -> None:
    world.table("tickets", [{"name": "n", "type": "text"}])
    world.role("clerk", ["tickets:*"])
    clerk = world.caller(world.org("North"), ["clerk"])
    dupes = sorted(expect(clerk.post(world.rows("tickets"), json={"n": "7"}), 201)["uid"]
                   for _ in range(2))
    expect(world.admin.put(f"{world.base}/tables/tickets/indexes/by_n",
                           json={"columns": ["n"], "unique": True}), 202)
    failed = world.settled_index("tickets", "by_n")
    assert failed["state"] == "failed" and failed["error"]["code"] == "CONFLICT"
    assert sorted(r["uid"] for r in failed["error"]["details"]["rows"]) == dupes
    refused = expect(world.admin.patch(f"{world.base}/tables/tickets", json={
        "alterColumns": [{"name": "n", "unique": True}]}), 422, "VALIDATION_FAILED")
    assert sorted(r["uid"] for r in refused["error"]["details"]["rows"]) == dupes


def test_a_search_index_is_gin_over_the_accent_folded_search_expression(
        invoices: tuple[AppWorld, Caller, Caller], database_url: str) -> None:
    world, north, _ = invoices
    expect(north.post(world.rows("invoices"), json={"notes": "Café crème, late"}), 201)
    put = expect(world.admin.put(f"{world.base}/tables/invoices/indexes/notes_search",
                                 json={"columns": ["notes"], "kind": "search"}), 202)
    assert put["kind"] == "search" and put["unique"] is False
    assert world.settled_index("invoices", "notes_search")["state"] == "ready"
    [index] = physical(database_url, world, "invoices")
    assert "USING gin ((ARRAY[org_uid]), authoric.search_vector(notes))" in index["def"]
    assert db_value(database_url, "SELECT authoric.search_vector($1) @@ "
                    "authoric.search_query($2)", "Café crème, late", "CAFE -paid") is True


@pytest.mark.parametrize("body", [
    {"columns": []},
    {"columns": ["nope"]},
    {"columns": ["vendor_uid"]},
    {"columns": ["number", "number"]},
    {"columns": [f"c{i}" for i in range(9)]},
    {"columns": ["amount"], "kind": "search"},
    {"columns": ["notes"], "kind": "search", "unique": True},
    {"columns": ["-notes"], "kind": "search"},
    {"columns": ["number"], "kind": "hash"},
    {"columns": "number"},
    {"columns": ["number"], "extra": 1},
])
def test_admin_gets_422_for_an_index_the_table_cannot_have(
        invoices: tuple[AppWorld, Caller, Caller], body: Any) -> None:
    world, _, _ = invoices
    expect(world.admin.put(f"{world.base}/tables/invoices/indexes/bad", json=body), 422,
           "VALIDATION_FAILED")
    assert expect(world.admin.get(f"{world.base}/tables/invoices/indexes"), 200)["items"] == []


def test_admin_gets_422_for_a_bad_index_name_and_404_for_an_unknown_table_or_index(
        invoices: tuple[AppWorld, Caller, Caller]) -> None:
    world, _, _ = invoices
    expect(world.admin.put(f"{world.base}/tables/invoices/indexes/Bad-Name",
                           json={"columns": ["number"]}), 422, "VALIDATION_FAILED")
    expect(world.admin.put(f"{world.base}/tables/nope/indexes/ok",
                           json={"columns": ["number"]}), 404, "NOT_FOUND")
    expect(world.admin.get(f"{world.base}/tables/invoices/indexes/none"), 404, "NOT_FOUND")
    expect(world.admin.delete(f"{world.base}/tables/invoices/indexes/none"), 404, "NOT_FOUND")


def test_admin_deletes_an_index_and_postgresql_no_longer_holds_it(
        invoices: tuple[AppWorld, Caller, Caller], database_url: str) -> None:
    world, _, _ = invoices
    url = f"{world.base}/tables/invoices/indexes/by_number"
    expect(world.admin.put(url, json={"columns": ["number"]}), 202)
    world.settled_index("invoices", "by_number")
    resp = world.admin.delete(url)
    assert resp.status_code == 204
    expect(world.admin.get(url), 404, "NOT_FOUND")
    assert physical(database_url, world, "invoices") == []
    # The name is free again, with other columns.
    expect(world.admin.put(url, json={"columns": ["notes"]}), 202)
    assert world.settled_index("invoices", "by_number")["columns"] == ["notes"]


def test_dropping_a_column_drops_the_indexes_that_hold_it(
        invoices: tuple[AppWorld, Caller, Caller]) -> None:
    world, _, _ = invoices
    for name, columns in (("by_notes", ["notes", "number"]), ("by_number", ["number"])):
        expect(world.admin.put(f"{world.base}/tables/invoices/indexes/{name}",
                               json={"columns": columns}), 202)
        world.settled_index("invoices", name)
    changed = expect(world.admin.patch(f"{world.base}/tables/invoices",
                                       json={"dropColumns": ["notes"]}), 200)
    assert [i["name"] for i in changed["indexes"]] == ["by_number"]


def test_an_app_user_token_cannot_manage_indexes(
        invoices: tuple[AppWorld, Caller, Caller]) -> None:
    world, north, _ = invoices
    expect(north.put(f"{world.base}/tables/invoices/indexes/x", json={"columns": ["number"]}),
           401, "UNAUTHENTICATED")
    expect(north.get(f"{world.base}/tables/invoices/indexes"), 401, "UNAUTHENTICATED")


def test_the_per_app_openapi_document_lists_indexes_select_options_and_the_display_column(
        invoices: tuple[AppWorld, Caller, Caller]) -> None:
    world, north, _ = invoices
    expect(world.admin.patch(f"{world.base}/tables/invoices", json={
        "addColumns": [{"name": "stage", "type": "select", "options": ["draft", "paid"]}],
        "displayColumn": "number"}), 200)
    expect(world.admin.put(f"{world.base}/tables/invoices/indexes/by_number",
                           json={"columns": ["-number"], "unique": True}), 202)
    doc = expect(north.get(f"/{world.name}/openapi.json"), 200)
    schema = doc["components"]["schemas"]["invoices"]
    assert schema["x-indexes"] == [{"name": "by_number", "columns": ["-number"],
                                    "unique": True, "kind": "btree"}]
    assert schema["x-display-column"] == "number"
    assert {"type": "string", "enum": ["draft", "paid"]} in schema["properties"]["stage"]["anyOf"]
    list_params = {p["name"] for p in doc["paths"][f"/{world.name}/autocrud/invoices"]["get"][
        "parameters"]}
    assert {"count", "expand"} <= list_params
    expect(world.admin.delete(f"{world.base}/tables/invoices/indexes/by_number"), 204)
    doc = expect(north.get(f"/{world.name}/openapi.json"), 200)
    assert "x-indexes" not in doc["components"]["schemas"]["invoices"]
