"""Schema changes (contract section 2): renames and alterations keep the data, everything that
names a column follows it, a conversion some row cannot take changes nothing and lists the rows,
`select` columns keep to their options, and open streams are told to resync."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server
from tests.sse import SSEClient, db_fetch


@pytest.fixture
def invoices(world: AppWorld) -> tuple[AppWorld, Caller]:
    """An `invoices` table and a clerk with every permission on it."""
    world.table("vendors", [{"name": "name", "type": "text", "required": True, "unique": True}])
    world.table("invoices", [{"name": "number", "type": "text"},
                             {"name": "status", "type": "text"},
                             {"name": "amount", "type": "text"},
                             {"name": "vendor", "type": "reference", "references": "vendors"}])
    world.role("clerk", ["invoices:*", "vendors:*"])
    return world, world.caller(world.org("North"), ["clerk"])


def patch(world: AppWorld, body: dict[str, Any], status: int = 200,
          code: str | None = None) -> Any:
    return expect(world.admin.patch(f"{world.base}/tables/invoices", json=body), status, code)


# Renames ------------------------------------------------------------------------------------

def test_a_rename_keeps_the_data_and_the_row_shows_the_new_name(
        invoices: tuple[AppWorld, Caller]) -> None:
    world, clerk = invoices
    vendor = expect(clerk.post(world.rows("vendors"), json={"name": "Acme"}), 201)
    row = expect(clerk.post(world.rows("invoices"), json={
        "number": "A-1", "vendor_uid": vendor["uid"]}), 201)
    changed = patch(world, {"renameColumns": {"number": "reference_no", "vendor": "supplier"}})
    assert [c["name"] for c in changed["columns"]] == ["reference_no", "status", "amount",
                                                       "supplier"]
    got = expect(clerk.get(f"{world.rows('invoices')}/{row['uid']}"), 200)
    assert got["reference_no"] == "A-1" and got["supplier_uid"] == vendor["uid"]
    assert "number" not in got and "vendor_uid" not in got
    listed = expect(clerk.get(world.rows("invoices"), params={"reference_no": "A-1"}), 200)
    assert [r["uid"] for r in listed["items"]] == [row["uid"]]
    # The reference still holds within the org.
    expect(clerk.post(world.rows("invoices"), json={"supplier_uid": row["uid"]}), 409,
           "CONFLICT")


def test_two_columns_can_swap_names_in_one_rename(invoices: tuple[AppWorld, Caller]) -> None:
    world, clerk = invoices
    row = expect(clerk.post(world.rows("invoices"), json={"number": "A-1",
                                                            "status": "paid"}), 201)
    patch(world, {"renameColumns": {"number": "status", "status": "number"}})
    got = expect(clerk.get(f"{world.rows('invoices')}/{row['uid']}"), 200)
    assert (got["number"], got["status"]) == ("paid", "A-1")


@pytest.mark.parametrize(("renames", "status"), [
    ({"nope": "x"}, 422), ({"number": "Bad Name"}, 422), ({"number": "uid"}, 422),
    ({"number": "status"}, 409), ({"number": "vendor_uid"}, 409),
    ({"number": "x", "status": "x"}, 422), ({"number": "count"}, 422), ({"number": "expand"}, 422),
])
def test_a_rename_that_cannot_be_changes_nothing(invoices: tuple[AppWorld, Caller],
                                                  renames: dict[str, str], status: int) -> None:
    world, _ = invoices
    before = expect(world.admin.get(f"{world.base}/tables/invoices"), 200)
    patch(world, {"renameColumns": renames}, status)
    assert expect(world.admin.get(f"{world.base}/tables/invoices"), 200) == before


def test_policies_redaction_indexes_and_display_column_follow_a_rename(
        invoices: tuple[AppWorld, Caller]) -> None:
    world, clerk = invoices
    world.role("reader", ["invoices:read", "invoices:read_list"],
               row_policies={"invoices": {"or": [{"status": {"ne": "draft"}},
                                                 {"not": {"vendor_uid": {"is_null": True}}}]}},
               redact={"invoices": ["amount", "number"]})
    expect(world.admin.put(f"{world.base}/tables/invoices/indexes/by_status",
                           json={"columns": ["-status", "number"]}), 202)
    patch(world, {"displayColumn": "number"})
    changed = patch(world, {"renameColumns": {"status": "state", "amount": "total",
                                              "vendor": "supplier"}})
    assert changed["displayColumn"] == "number"
    assert changed["indexes"][0]["columns"] == ["-state", "number"]
    role = expect(world.admin.get(f"{world.base}/roles/reader"), 200)
    assert role["rowPolicies"] == {"invoices": {"or": [{"state": {"ne": "draft"}},
                                                       {"not": {"supplier_uid": {"is_null": True}}}]}}
    assert role["redact"] == {"invoices": ["total", "number"]}
    patch(world, {"renameColumns": {"number": "ref"}})
    assert expect(world.admin.get(f"{world.base}/tables/invoices"), 200)["displayColumn"] == "ref"
    # The policy still works under the new names.
    reader = world.caller(clerk.org_uid or "", ["reader"])
    draft = expect(clerk.post(world.rows("invoices"), json={"state": "draft"}), 201)
    paid = expect(clerk.post(world.rows("invoices"), json={"state": "paid", "total": "9"}), 201)
    seen = expect(reader.get(world.rows("invoices")), 200)["items"]
    assert [r["uid"] for r in seen] == [paid["uid"]] and seen[0]["total"] == "[redacted]"
    expect(reader.get(f"{world.rows('invoices')}/{draft['uid']}"), 404, "NOT_FOUND")


def test_renaming_a_text_column_leaves_a_policy_on_its_uid_named_neighbour_alone(
        world: AppWorld) -> None:
    world.table("cards", [{"name": "foo", "type": "text"}, {"name": "foo_uid", "type": "text"},
                          {"name": "bar_uid", "type": "text"}])
    policy = {"cards": {"foo_uid": {"eq": {"$principal": "uid"}}}}
    world.role("holder", ["cards:read"], row_policies=policy)
    expect(world.admin.patch(f"{world.base}/tables/cards",
                             json={"renameColumns": {"foo": "bar"}}), 200)
    assert expect(world.admin.get(f"{world.base}/roles/holder"), 200)["rowPolicies"] == policy


def test_dropping_a_redacted_column_takes_it_out_of_redaction_but_a_policy_on_it_refuses(
        invoices: tuple[AppWorld, Caller]) -> None:
    world, _ = invoices
    world.role("reader", ["invoices:read"], redact={"invoices": ["amount", "number"]})
    world.role("guarded", ["invoices:read"],
               row_policies={"invoices": {"or": [{"status": {"eq": "paid"}},
                                                 {"vendor_uid": {"is_null": True}}]}})
    patch(world, {"dropColumns": ["amount"]})
    assert expect(world.admin.get(f"{world.base}/roles/reader"), 200)["redact"] == {
        "invoices": ["number"]}
    before = expect(world.admin.get(f"{world.base}/tables/invoices"), 200)
    for column in ("status", "vendor"):
        refused = patch(world, {"dropColumns": ["number", column]}, 422, "VALIDATION_FAILED")
        assert refused["error"]["details"]["role"] == "guarded"
        assert "guarded" in refused["error"]["message"]
    assert expect(world.admin.get(f"{world.base}/tables/invoices"), 200) == before
    assert expect(world.admin.get(f"{world.base}/roles/reader"), 200)["redact"] == {
        "invoices": ["number"]}


def test_a_delete_logged_before_a_rename_is_still_judged_for_a_resuming_stream(
        invoices: tuple[AppWorld, Caller], server: ServerProcess) -> None:
    world, clerk = invoices
    world.role("reader", ["invoices:read", "invoices:read_list"],
               row_policies={"invoices": {"status": {"eq": "paid"}}})
    reader = world.caller(clerk.org_uid or "", ["reader"])
    first = expect(clerk.post(world.rows("invoices"), json={"status": "paid"}), 201)
    hidden = expect(clerk.post(world.rows("invoices"), json={"status": "draft"}), 201)
    with SSEClient(server.url, f"{world.rows('invoices')}/subscribe", reader.token) as stream:
        stream.wait_connected()
        fence = expect(clerk.post(world.rows("invoices"), json={"status": "paid"}), 201)
        start = stream.wait_for_change(fence["uid"]).pos
    for row in (first, hidden):
        expect(clerk.delete(f"{world.rows('invoices')}/{row['uid']}"), 204)
    patch(world, {"renameColumns": {"status": "state"}})
    with SSEClient(server.url, f"{world.rows('invoices')}/subscribe", reader.token,
                   last_event_id=start) as stream:
        stream.wait_for(lambda f: f.event == "resync")
        deletes = [f.row_uid for f in stream.changes() if f.op == "delete"]
    assert deletes == [first["uid"]]  # the draft's delete stays unseen: judged by `state`


def test_deletes_logged_before_a_retype_are_judged_by_the_new_type_for_a_resuming_stream(
        invoices: tuple[AppWorld, Caller], server: ServerProcess) -> None:
    """Old images hold the old type's values: "12" converts to 12, "twelve" (whose row is
    gone, so no check refused the retype) to null, and a stream resuming over both judges
    them by the integer policy without failing."""
    world, clerk = invoices
    rows = [expect(clerk.post(world.rows("invoices"), json={"amount": amount}), 201)
            for amount in ("12", "twelve", "5")]
    with SSEClient(server.url, f"{world.rows('invoices')}/subscribe", clerk.token) as stream:
        stream.wait_connected()
        fence = expect(clerk.post(world.rows("invoices"), json={"amount": "99"}), 201)
        start = stream.wait_for_change(fence["uid"]).pos
    for row in rows:
        expect(clerk.delete(f"{world.rows('invoices')}/{row['uid']}"), 204)
    patch(world, {"alterColumns": [{"name": "amount", "type": "integer"}]})
    world.role("reader", ["invoices:read", "invoices:read_list"],
               row_policies={"invoices": {"amount": {"gt": 10}}})
    reader = world.caller(clerk.org_uid or "", ["reader"])
    after = expect(clerk.post(world.rows("invoices"), json={"amount": 40}), 201)
    with SSEClient(server.url, f"{world.rows('invoices')}/subscribe", reader.token,
                   last_event_id=start) as stream:
        stream.wait_for_change(after["uid"])
        deletes = [f.row_uid for f in stream.changes() if f.op == "delete"]
    assert deletes == [rows[0]["uid"]]


# Alterations --------------------------------------------------------------------------------

def test_text_becomes_numeric_keeping_the_values(invoices: tuple[AppWorld, Caller]) -> None:
    world, clerk = invoices
    row = expect(clerk.post(world.rows("invoices"), json={"amount": " 12.50 "}), 201)
    expect(clerk.post(world.rows("invoices"), json={"amount": None}), 201)
    changed = patch(world, {"alterColumns": [{"name": "amount", "type": "numeric"}]})
    assert next(c for c in changed["columns"] if c["name"] == "amount")["type"] == "numeric"
    got = expect(clerk.get(f"{world.rows('invoices')}/{row['uid']}"), 200)
    assert got["amount"] == "12.50"
    expect(clerk.post(world.rows("invoices"), json={"amount": "abc"}), 422, "VALIDATION_FAILED")
    listed = expect(clerk.get(world.rows("invoices"), params={"amount[gt]": "12"}), 200)
    assert [r["uid"] for r in listed["items"]] == [row["uid"]]


def test_a_conversion_some_rows_cannot_take_lists_them_and_changes_nothing(
        invoices: tuple[AppWorld, Caller]) -> None:
    world, clerk = invoices
    good = expect(clerk.post(world.rows("invoices"), json={"amount": "12"}), 201)
    bad = [expect(clerk.post(world.rows("invoices"), json={"amount": v}), 201)["uid"]
           for v in ("twelve", "1.5")]
    failed = patch(world, {"alterColumns": [{"name": "amount", "type": "integer"}],
                           "renameColumns": {"number": "ref"}}, 422, "VALIDATION_FAILED")
    rows = failed["error"]["details"]["rows"]
    assert sorted(r["uid"] for r in rows) == sorted(bad)
    assert all(r["column"] == "amount" and r["message"] for r in rows)
    # Each listed row says what it holds, so the operator sees the value that was refused.
    assert {r["uid"]: r["value"] for r in rows} == dict(zip(bad, ("twelve", "1.5"), strict=True))
    # Nothing changed: not the type, not the rename in the same PATCH.
    definition = expect(world.admin.get(f"{world.base}/tables/invoices"), 200)
    assert [(c["name"], c["type"]) for c in definition["columns"]][:3] == [
        ("number", "text"), ("status", "text"), ("amount", "text")]
    assert expect(clerk.get(f"{world.rows('invoices')}/{good['uid']}"), 200)["amount"] == "12"


URN = "urn:uuid:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"


@pytest.mark.parametrize(("target", "converts", "refused"), [
    # Arabic-Indic digits are digits to Python, not to PostgreSQL; neither reads hex.
    ("integer", {" +7 ": 7, "-12": -12}, ["١٢", "twelve", "1.5", "0x10", "99999999999999999999"]),
    ("numeric", {"12.50": "12.50", " -3 ": "-3"}, ["NaN", "1_000", "Infinity"]),
    ("boolean", {"yes": True, "F": False}, ["on", "maybe"]),
    ("date", {"2026-12-03": "2026-12-03"}, ["2026-W49-5", "today", "31/01/2026"]),
    ("timestamp", {"2026-01-31T12:00:00+01:00": "2026-01-31T11:00:00Z"},
     ["2026-01-31T12:00:00", "now", "infinity"]),  # no offset: never read in a guessed zone
    ("uuid", {"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
     [URN, "nope"]),
])
def test_a_retype_lists_exactly_the_rows_its_conversion_refuses_then_converts_the_rest(
        invoices: tuple[AppWorld, Caller], target: str, converts: dict[str, Any],
        refused: list[str]) -> None:
    world, clerk = invoices
    good = {expect(clerk.post(world.rows("invoices"), json={"amount": v}), 201)["uid"]: want
            for v, want in converts.items()}
    bad = [expect(clerk.post(world.rows("invoices"), json={"amount": v}), 201)["uid"]
           for v in refused]
    failed = patch(world, {"alterColumns": [{"name": "amount", "type": target}]}, 422,
                   "VALIDATION_FAILED")
    rows = failed["error"]["details"]["rows"]
    assert sorted(r["uid"] for r in rows) == sorted(bad)
    assert all(r["column"] == "amount" and target in r["message"] for r in rows)
    for uid in bad:
        expect(clerk.delete(f"{world.rows('invoices')}/{uid}"), 204)
    patch(world, {"alterColumns": [{"name": "amount", "type": target}]})
    for uid, want in good.items():
        assert expect(clerk.get(f"{world.rows('invoices')}/{uid}"), 200)["amount"] == want


def test_a_numeric_becomes_an_integer_only_where_it_is_whole_and_in_range(
        invoices: tuple[AppWorld, Caller]) -> None:
    world, clerk = invoices
    patch(world, {"alterColumns": [{"name": "amount", "type": "numeric"}]})
    whole = expect(clerk.post(world.rows("invoices"), json={"amount": "12.00"}), 201)["uid"]
    bad = sorted(expect(clerk.post(world.rows("invoices"), json={"amount": v}), 201)["uid"]
                 for v in ("12.5", "99999999999999999999"))
    failed = patch(world, {"alterColumns": [{"name": "amount", "type": "integer"}]}, 422)
    rows = failed["error"]["details"]["rows"]
    assert sorted(r["uid"] for r in rows) == bad
    assert any("out of range" in r["message"] for r in rows)  # PostgreSQL says why
    for uid in bad:
        expect(clerk.delete(f"{world.rows('invoices')}/{uid}"), 204)
    patch(world, {"alterColumns": [{"name": "amount", "type": "integer"}]})
    assert expect(clerk.get(f"{world.rows('invoices')}/{whole}"), 200)["amount"] == 12


@pytest.mark.parametrize("unique_before", [False, True])
def test_values_that_become_equal_once_converted_are_listed_as_duplicates(
        invoices: tuple[AppWorld, Caller], unique_before: bool) -> None:
    world, clerk = invoices
    if unique_before:
        patch(world, {"alterColumns": [{"name": "amount", "unique": True}]})
    twins = sorted(expect(clerk.post(world.rows("invoices"), json={"amount": v}), 201)["uid"]
                   for v in ("01", "1"))
    expect(clerk.post(world.rows("invoices"), json={"amount": "2"}), 201)
    other = world.caller(world.org("South"), ["clerk"])  # the same value in another org is fine
    expect(other.post(world.rows("invoices"), json={"amount": "1"}), 201)
    failed = patch(world, {"alterColumns": [{"name": "amount", "type": "integer",
                                             "unique": True}]}, 422, "VALIDATION_FAILED")
    assert sorted(r["uid"] for r in failed["error"]["details"]["rows"]) == twins
    definition = expect(world.admin.get(f"{world.base}/tables/invoices"), 200)
    assert next(c for c in definition["columns"] if c["name"] == "amount")["type"] == "text"
    expect(clerk.patch(f"{world.rows('invoices')}/{twins[0]}", json={"amount": "3"}), 200)
    patch(world, {"alterColumns": [{"name": "amount", "type": "integer", "unique": True}]})


def test_at_most_a_hundred_failing_rows_are_listed(invoices: tuple[AppWorld, Caller]) -> None:
    world, clerk = invoices
    csv = "amount\n" + "".join(f"x{i}\n" for i in range(150))
    expect(clerk.post(f"{world.rows('invoices')}/import", content=csv,
                      headers={"Content-Type": "text/csv"}), 201)
    failed = patch(world, {"alterColumns": [{"name": "amount", "type": "boolean"}]}, 422)
    assert len(failed["error"]["details"]["rows"]) == 100


def test_making_a_column_required_or_unique_checks_the_rows(
        invoices: tuple[AppWorld, Caller]) -> None:
    world, clerk = invoices
    empty = expect(clerk.post(world.rows("invoices"), json={"number": None}), 201)
    failed = patch(world, {"alterColumns": [{"name": "number", "required": True}]}, 422)
    assert failed["error"]["details"]["rows"] == [
        {"uid": empty["uid"], "column": "number", "message": "required, but null", "value": None}]
    expect(clerk.patch(f"{world.rows('invoices')}/{empty['uid']}", json={"number": "A-1"}), 200)
    twin = expect(clerk.post(world.rows("invoices"), json={"number": "A-1"}), 201)
    failed = patch(world, {"alterColumns": [{"name": "number", "required": True,
                                             "unique": True}]}, 422)
    assert sorted(r["uid"] for r in failed["error"]["details"]["rows"]) == sorted(
        [empty["uid"], twin["uid"]])
    expect(clerk.patch(f"{world.rows('invoices')}/{twin['uid']}", json={"number": "A-2"}), 200)
    changed = patch(world, {"alterColumns": [{"name": "number", "required": True,
                                              "unique": True, "default": "TBD"}]})
    column = changed["columns"][0]
    assert (column["required"], column["unique"], column["default"]) == (True, True, "TBD")
    expect(clerk.post(world.rows("invoices"), json={"number": "A-1"}), 409, "CONFLICT")
    assert expect(clerk.post(world.rows("invoices"), json={}), 201)["number"] == "TBD"
    patch(world, {"alterColumns": [{"name": "number", "unique": False}]})
    expect(clerk.post(world.rows("invoices"), json={"number": "A-1"}), 201)


@pytest.mark.parametrize("alter", [
    {"name": "nope", "type": "text"},
    {"name": "amount", "type": "json"},
    {"name": "vendor", "type": "text"},
    {"name": "amount", "type": "reference"},
    {"name": "amount", "type": "wat"},
    {"name": "amount", "type": None},
    {"name": "amount", "default": 5},
    {"name": "amount", "options": ["a"]},
])
def test_an_alteration_the_column_cannot_take_is_422(invoices: tuple[AppWorld, Caller],
                                                     alter: dict[str, Any]) -> None:
    world, _ = invoices
    patch(world, {"alterColumns": [alter]}, 422, "VALIDATION_FAILED")


# select ---------------------------------------------------------------------------------------

def test_a_select_column_takes_only_its_options_on_every_write_path(
        invoices: tuple[AppWorld, Caller], database_url: str) -> None:
    world, clerk = invoices
    patch(world, {"addColumns": [{"name": "stage", "type": "select",
                                  "options": ["draft", "paid"], "default": "draft"}]})
    row = expect(clerk.post(world.rows("invoices"), json={}), 201)
    assert row["stage"] == "draft"
    failed = expect(clerk.post(world.rows("invoices"), json={"stage": "lost"}), 422,
                    "VALIDATION_FAILED")
    assert failed["error"]["details"]["errors"][0]["column"] == "stage"
    expect(clerk.patch(world.rows("invoices"), params={"stage": "draft"},
                       json={"set": {"stage": "lost"}}), 422, "VALIDATION_FAILED")
    bad_csv = "stage\npaid\nlost\n"
    failed = expect(clerk.post(f"{world.rows('invoices')}/import", content=bad_csv,
                               headers={"Content-Type": "text/csv"}), 422)
    assert failed["error"]["details"]["rows"][0]["line"] == 3
    # The database holds the line too, whatever writes the row.
    with pytest.raises(asyncpg.CheckViolationError):
        db_fetch(database_url, f"""UPDATE "app_{_app_uid(world)}".invoices SET stage = 'lost'""")


def _app_uid(world: AppWorld) -> str:
    return str(expect(world.admin.get(world.base), 200)["uid"]).replace("-", "")


def test_removing_an_option_still_in_use_lists_the_rows_and_text_becomes_select(
        invoices: tuple[AppWorld, Caller]) -> None:
    world, clerk = invoices
    rows = {s: expect(clerk.post(world.rows("invoices"), json={"status": s}), 201)["uid"]
            for s in ("draft", "paid", "void")}
    failed = patch(world, {"alterColumns": [{"name": "status", "type": "select",
                                             "options": ["draft", "paid"]}]}, 422)
    assert [r["uid"] for r in failed["error"]["details"]["rows"]] == [rows["void"]]
    changed = patch(world, {"alterColumns": [{"name": "status", "type": "select",
                                              "options": ["draft", "paid", "void"]}]})
    assert changed["columns"][1]["options"] == ["draft", "paid", "void"]
    failed = patch(world, {"alterColumns": [{"name": "status", "options": ["draft", "paid"]}]},
                   422)
    assert [r["uid"] for r in failed["error"]["details"]["rows"]] == [rows["void"]]
    expect(clerk.delete(f"{world.rows('invoices')}/{rows['void']}"), 204)
    patch(world, {"alterColumns": [{"name": "status", "options": ["draft", "paid", "o'k"]}]})
    expect(clerk.post(world.rows("invoices"), json={"status": "o'k"}), 201)
    expect(clerk.post(world.rows("invoices"), json={"status": "void"}), 422)
    back = patch(world, {"alterColumns": [{"name": "status", "type": "text"}]})
    assert "options" not in back["columns"][1]
    expect(clerk.post(world.rows("invoices"), json={"status": "void"}), 201)


@pytest.mark.parametrize("column", [
    {"name": "stage", "type": "select"},
    {"name": "stage", "type": "select", "options": []},
    {"name": "stage", "type": "select", "options": ["a", "a"]},
    {"name": "stage", "type": "select", "options": ["a", " "]},
    {"name": "stage", "type": "text", "options": ["a"]},
    {"name": "stage", "type": "select", "options": ["a"], "default": "b"},
])
def test_a_select_column_needs_distinct_options_and_a_default_among_them(
        invoices: tuple[AppWorld, Caller], column: dict[str, Any]) -> None:
    world, _ = invoices
    patch(world, {"addColumns": [column]}, 422, "VALIDATION_FAILED")


# displayColumn --------------------------------------------------------------------------------

def test_the_display_column_defaults_to_the_first_required_unique_text_column(
        invoices: tuple[AppWorld, Caller]) -> None:
    world, _ = invoices
    assert expect(world.admin.get(f"{world.base}/tables/vendors"), 200)["displayColumn"] == "name"
    assert expect(world.admin.get(f"{world.base}/tables/invoices"), 200)["displayColumn"] is None
    assert patch(world, {"displayColumn": "status"})["displayColumn"] == "status"
    patch(world, {"displayColumn": "nope"}, 422, "VALIDATION_FAILED")
    assert patch(world, {"displayColumn": None})["displayColumn"] is None
    patch(world, {"displayColumn": "status"})
    assert patch(world, {"dropColumns": ["status"]})["displayColumn"] is None


# Streams, locks ----------------------------------------------------------------------------

def test_open_streams_of_the_table_get_resync_schema_change(
        invoices: tuple[AppWorld, Caller], server: ServerProcess) -> None:
    world, clerk = invoices
    south = world.caller(world.org("South"), ["clerk"])
    with SSEClient(server.url, f"{world.rows('invoices')}/subscribe", clerk.token) as north_s, \
            SSEClient(server.url, f"{world.rows('invoices')}/subscribe", south.token) as south_s, \
            SSEClient(server.url, f"{world.rows('vendors')}/subscribe", clerk.token) as vendors_s:
        for stream in (north_s, south_s, vendors_s):
            stream.wait_connected()
        patch(world, {"operations": {"delete": False}})  # not a change of columns
        patch(world, {"renameColumns": {"number": "ref"}})
        for stream in (north_s, south_s):
            frame = stream.wait_for(lambda f: f.event == "resync")
            assert frame.data == {"reason": "schema_change", "table": "invoices"}
            assert frame.id is not None
        fence = expect(clerk.post(world.rows("vendors"), json={"name": "Fence"}), 201)
        vendors_s.wait_for_change(fence["uid"])
        assert not [f for f in vendors_s.events() if f.event == "resync"]
        row = expect(clerk.post(world.rows("invoices"), json={"ref": "A-1"}), 201)
        assert north_s.wait_for_change(row["uid"]).data["row"]["ref"] == "A-1"
        assert len([f for f in north_s.events() if f.event == "resync"]) == 1


@pytest.fixture
def held_lock(invoices: tuple[AppWorld, Caller], database_url: str) -> Iterator[None]:
    """A transaction holding a lock on `invoices` (a long query's), released at the end."""
    world, _ = invoices
    ready, release = threading.Event(), threading.Event()

    async def hold() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            async with conn.transaction():
                await conn.execute(f'LOCK TABLE "app_{_app_uid(world)}".invoices '
                                   "IN ACCESS SHARE MODE")
                ready.set()
                while not release.is_set():
                    await asyncio.sleep(0.05)
        finally:
            await conn.close()

    thread = threading.Thread(target=lambda: asyncio.run(hold()), daemon=True)
    thread.start()
    assert ready.wait(30)
    yield
    release.set()
    thread.join(30)


def test_a_change_waiting_behind_a_long_query_gives_up_cleanly_and_changes_nothing(
        invoices: tuple[AppWorld, Caller], held_lock: None) -> None:
    world, clerk = invoices
    failed = patch(world, {"renameColumns": {"number": "ref"}}, 503, "UNAVAILABLE")
    assert failed["error"]["message"]
    definition = expect(world.admin.get(f"{world.base}/tables/invoices"), 200)
    assert definition["columns"][0]["name"] == "number"
    expect(clerk.get(world.rows("invoices")), 200)  # reads go on


# Replicas -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def replica(database_url: str, data_dir: Path) -> Iterator[ServerProcess]:
    proc = start_server(database_url, data_dir)
    yield proc
    proc.stop()


def test_a_rename_under_a_row_policy_applies_on_another_replica_at_its_next_request(
        invoices: tuple[AppWorld, Caller], replica: ServerProcess) -> None:
    world, clerk = invoices
    world.role("reader", ["invoices:read", "invoices:read_list"],
               row_policies={"invoices": {"status": {"eq": "paid"}}}, redact={"invoices": ["amount"]})
    paid = expect(clerk.post(world.rows("invoices"), json={"status": "paid", "amount": "1"}), 201)
    draft = expect(clerk.post(world.rows("invoices"), json={"status": "draft"}), 201)
    with httpx.Client(base_url=replica.url, timeout=30) as other:
        reader = world.caller(clerk.org_uid or "", ["reader"])
        there = Caller(other, reader.token)
        # Warm the replica with the old shape.
        assert [r["uid"] for r in expect(there.get(world.rows("invoices")), 200)["items"]] == [
            paid["uid"]]
        patch(world, {"renameColumns": {"status": "state", "amount": "total"}})
        items = expect(there.get(world.rows("invoices")), 200)["items"]
        assert [(r["uid"], r["state"], r["total"]) for r in items] == [
            (paid["uid"], "paid", "[redacted]")]
        expect(there.get(f"{world.rows('invoices')}/{draft['uid']}"), 404, "NOT_FOUND")
        expect(there.get(world.rows("invoices"), params={"state": "paid"}), 200)
        expect(there.get(world.rows("invoices"), params={"status": "paid"}), 400, "BAD_REQUEST")
        expect(there.get(world.rows("invoices"), params={"total": "1"}), 400, "BAD_REQUEST")
