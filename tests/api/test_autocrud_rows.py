"""Single-row autocrud routes (contract section 4): create, read, update, delete.

Callers: a member with the table's permissions, a member without them, a member of another
org, a writer who may not read, and callers on tables with operations switched off.
"""

from __future__ import annotations

import json
import random
import string
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)

ALL_TYPES = [
    {"name": "title", "type": "text"},
    {"name": "qty", "type": "integer"},
    {"name": "amount", "type": "numeric"},
    {"name": "paid", "type": "boolean"},
    {"name": "due_at", "type": "timestamp"},
    {"name": "due_on", "type": "date"},
    {"name": "external_id", "type": "uuid"},
    {"name": "meta", "type": "json"},
]


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    """Whatever a test does, the server never logs a traceback (an unexpected error)."""
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
def typed(world: AppWorld) -> tuple[AppWorld, Caller]:
    """An app with a table holding one column of every scalar type, and a member who may do all."""
    world.table("things", ALL_TYPES)
    world.role("writer", ["*:*"])
    return world, world.caller(world.org("Northwind"), ["writer"])


@pytest.fixture
def invoices(world: AppWorld) -> AppWorld:
    """The contract's invoices/vendors example, with a `writer` role on both tables."""
    world.table("vendors", [{"name": "name", "type": "text", "required": True}])
    world.table("invoices", [
        {"name": "invoice_number", "type": "text", "required": True, "unique": True},
        {"name": "vendor", "type": "reference", "references": "vendors"},
        {"name": "status", "type": "text", "default": "received"},
        {"name": "amount", "type": "numeric"},
    ])
    world.role("writer", ["invoices:*", "vendors:*"])
    world.org("North")
    world.org("South")
    return world


def _writer(world: AppWorld, org: str = "North") -> Caller:
    return world.caller(world.orgs[org], ["writer"])


def _count(world: AppWorld, caller: Caller, table: str) -> int:
    return len(expect(caller.get(world.rows(table), params={"limit": 1000}), 200)["items"])


# Values round-trip -----------------------------------------------------------------------

def test_member_writes_every_column_type_and_reads_back_the_same_values(
        typed: tuple[AppWorld, Caller]) -> None:
    world, member = typed
    ext = str(uuid.uuid4())
    body = {"title": "Ünïcode ✓ 'quoted' \"double\"", "qty": 42, "amount": "8760.00",
            "paid": True, "due_at": "2026-01-31T12:00:00Z", "due_on": "2026-02-28",
            "external_id": ext, "meta": {"tags": ["a", "b"], "nested": {"n": 1, "x": None}}}
    row = expect(member.post(world.rows("things"), json=body), 201)
    assert {k: row[k] for k in body} == body
    assert list(row) == ["uid", *body, "createdAt", "updatedAt"]
    uuid.UUID(row["uid"])
    assert row["createdAt"].endswith("Z") and row["updatedAt"].endswith("Z")
    assert expect(member.get(f"{world.rows('things')}/{row['uid']}"), 200) == row
    assert expect(member.get(world.rows("things")), 200)["items"] == [row]


def test_numerics_are_exact_decimals_returned_as_strings(typed: tuple[AppWorld, Caller]) -> None:
    world, member = typed
    for given, shown in [("8760.00", "8760.00"), ("0.1", "0.1"), (10.5, "10.5"), (7, "7"),
                         ("-123456789012345678901234567890.000000001",
                          "-123456789012345678901234567890.000000001")]:
        row = expect(member.post(world.rows("things"), json={"amount": given}), 201)
        assert row["amount"] == shown
        assert expect(member.get(f"{world.rows('things')}/{row['uid']}"), 200)["amount"] == shown


def test_timestamps_with_any_offset_come_back_in_utc_with_z(typed: tuple[AppWorld, Caller]) -> None:
    world, member = typed
    for given, shown in [("2026-01-31T14:00:00+02:00", "2026-01-31T12:00:00Z"),
                         ("2026-01-31T12:00:00.250Z", "2026-01-31T12:00:00.250000Z"),
                         ("2025-12-31T23:30:00-01:00", "2026-01-01T00:30:00Z")]:
        row = expect(member.post(world.rows("things"), json={"due_at": given}), 201)
        assert row["due_at"] == shown
        assert expect(member.get(f"{world.rows('things')}/{row['uid']}"), 200)["due_at"] == shown


def test_integers_hold_the_full_64_bit_range(typed: tuple[AppWorld, Caller]) -> None:
    world, member = typed
    for value in (INT64_MAX, INT64_MIN, 0, -1):
        row = expect(member.post(world.rows("things"), json={"qty": value}), 201)
        assert row["qty"] == value
        assert expect(member.get(f"{world.rows('things')}/{row['uid']}"), 200)["qty"] == value


def test_json_column_keeps_any_json_value(typed: tuple[AppWorld, Caller]) -> None:
    world, member = typed
    for value in ([1, "two", {"three": 3}], "just text", 3.5, False, {"": {"deep": [[]]}}):
        row = expect(member.post(world.rows("things"), json={"meta": value}), 201)
        assert expect(member.get(f"{world.rows('things')}/{row['uid']}"), 200)["meta"] == value


def test_columns_left_out_of_a_create_are_null(typed: tuple[AppWorld, Caller]) -> None:
    world, member = typed
    row = expect(member.post(world.rows("things"), json={}), 201)
    assert all(row[c["name"]] is None for c in ALL_TYPES)


@pytest.mark.parametrize("column,value", [
    ("qty", INT64_MAX + 1), ("qty", INT64_MIN - 1), ("qty", "5"), ("qty", 1.5),
    ("qty", True), ("amount", "abc"), ("amount", True), ("amount", "NaN"), ("amount", [1]),
    ("paid", "true"), ("paid", 1), ("due_at", "yesterday"), ("due_at", "2026-01-31T12:00:00"),
    ("due_at", 1767225600), ("due_on", "2026-02-30"), ("due_on", "31/01/2026"),
    ("external_id", "not-a-uuid"), ("external_id", 5), ("title", 5), ("title", ["a"]),
    ("title", "nul\u0000byte"),
])
def test_member_gets_422_naming_the_column_for_a_value_of_the_wrong_type(
        typed: tuple[AppWorld, Caller], column: str, value: Any) -> None:
    world, member = typed
    resp = member.post(world.rows("things"), json={"title": "ok", column: value}
                       if column != "title" else {column: value})
    expect(resp, 422, "VALIDATION_FAILED")
    assert column in json.dumps(resp.json()["error"]["details"])
    assert _count(world, member, "things") == 0


def test_member_gets_422_for_a_wrong_type_in_an_update_and_the_row_is_unchanged(
        typed: tuple[AppWorld, Caller]) -> None:
    world, member = typed
    row = expect(member.post(world.rows("things"), json={"qty": 1, "title": "t"}), 201)
    path = f"{world.rows('things')}/{row['uid']}"
    expect(member.patch(path, json={"title": "changed", "qty": "two"}), 422, "VALIDATION_FAILED")
    assert expect(member.get(path), 200) == row


# Required and default --------------------------------------------------------------------

def test_member_gets_422_naming_a_missing_required_column(invoices: AppWorld) -> None:
    member = _writer(invoices)
    for body in ({"status": "x"}, {"invoice_number": None}):
        resp = member.post(invoices.rows("invoices"), json=body)
        expect(resp, 422, "VALIDATION_FAILED")
        assert "invoice_number" in json.dumps(resp.json()["error"]["details"])
    assert _count(invoices, member, "invoices") == 0


def test_member_gets_422_clearing_a_required_column_but_may_update_around_it(
        invoices: AppWorld) -> None:
    member = _writer(invoices)
    row = expect(member.post(invoices.rows("invoices"), json={"invoice_number": "A-1"}), 201)
    path = f"{invoices.rows('invoices')}/{row['uid']}"
    expect(member.patch(path, json={"invoice_number": None}), 422, "VALIDATION_FAILED")
    assert expect(member.patch(path, json={"amount": "1.00"}), 200)["invoice_number"] == "A-1"


def test_a_default_fills_a_column_left_out_and_never_overrides_a_given_value(
        invoices: AppWorld) -> None:
    member = _writer(invoices)
    defaulted = expect(member.post(invoices.rows("invoices"), json={"invoice_number": "A-1"}), 201)
    assert defaulted["status"] == "received"
    given = expect(member.post(invoices.rows("invoices"),
                               json={"invoice_number": "A-2", "status": "approved"}), 201)
    assert given["status"] == "approved"
    path = f"{invoices.rows('invoices')}/{given['uid']}"
    # An update that leaves status out does not put the default back.
    assert expect(member.patch(path, json={"amount": "5"}), 200)["status"] == "approved"


# Update and delete -----------------------------------------------------------------------

def test_member_updates_some_columns_and_the_rest_stay_as_they_were(
        typed: tuple[AppWorld, Caller]) -> None:
    world, member = typed
    row = expect(member.post(world.rows("things"), json={"title": "t", "qty": 1, "paid": False}),
                 201)
    path = f"{world.rows('things')}/{row['uid']}"
    updated = expect(member.patch(path, json={"qty": 2, "title": None}), 200)
    assert updated["qty"] == 2 and updated["title"] is None and updated["paid"] is False
    assert updated["uid"] == row["uid"] and updated["createdAt"] == row["createdAt"]
    assert updated["updatedAt"] > row["updatedAt"]
    assert expect(member.get(path), 200) == updated


def test_member_deletes_a_row_and_it_is_gone_everywhere(typed: tuple[AppWorld, Caller]) -> None:
    world, member = typed
    keep = expect(member.post(world.rows("things"), json={"title": "keep"}), 201)
    gone = expect(member.post(world.rows("things"), json={"title": "gone"}), 201)
    path = f"{world.rows('things')}/{gone['uid']}"
    resp = member.delete(path)
    assert resp.status_code == 204 and resp.content == b""
    expect(member.get(path), 404, "NOT_FOUND")
    expect(member.patch(path, json={"title": "back"}), 404, "NOT_FOUND")
    expect(member.delete(path), 404, "NOT_FOUND")
    assert expect(member.get(world.rows("things")), 200)["items"] == [keep]


def test_soft_deleted_row_disappears_from_read_list_update_and_delete(world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}], softDelete=True)
    world.role("writer", ["notes:*"])
    member = world.caller(world.org("Northwind"), ["writer"])
    keep = expect(member.post(world.rows("notes"), json={"body": "keep"}), 201)
    gone = expect(member.post(world.rows("notes"), json={"body": "gone"}), 201)
    path = f"{world.rows('notes')}/{gone['uid']}"
    assert member.delete(path).status_code == 204
    expect(member.get(path), 404, "NOT_FOUND")
    expect(member.patch(path, json={"body": "back"}), 404, "NOT_FOUND")
    expect(member.delete(path), 404, "NOT_FOUND")
    assert expect(member.get(world.rows("notes")), 200)["items"] == [keep]
    assert expect(member.get(world.rows("notes"), params={"uid": gone["uid"]}), 200)["items"] == []


@pytest.mark.parametrize("uid", ["not-a-uid", "1", str(uuid.uuid4())])
def test_member_gets_404_for_a_row_uid_that_does_not_exist(typed: tuple[AppWorld, Caller],
                                                           uid: str) -> None:
    world, member = typed
    path = f"{world.rows('things')}/{uid}"
    expect(member.get(path), 404, "NOT_FOUND")
    expect(member.patch(path, json={"title": "x"}), 404, "NOT_FOUND")
    expect(member.delete(path), 404, "NOT_FOUND")
    assert _count(world, member, "things") == 0


# References and uniqueness ---------------------------------------------------------------

def test_a_reference_appears_as_name_uid_and_points_at_the_row(invoices: AppWorld) -> None:
    member = _writer(invoices)
    vendor = expect(member.post(invoices.rows("vendors"), json={"name": "Acme"}), 201)
    row = expect(member.post(invoices.rows("invoices"),
                             json={"invoice_number": "A-1", "vendor_uid": vendor["uid"]}), 201)
    assert row["vendor_uid"] == vendor["uid"] and "vendor" not in row
    got = expect(member.get(f"{invoices.rows('invoices')}/{row['uid']}"), 200)
    assert got["vendor_uid"] == vendor["uid"]


def test_member_gets_409_referencing_a_row_that_does_not_exist(invoices: AppWorld) -> None:
    member = _writer(invoices)
    expect(member.post(invoices.rows("invoices"), json={
        "invoice_number": "A-1", "vendor_uid": str(uuid.uuid4())}), 409, "CONFLICT")
    assert _count(invoices, member, "invoices") == 0
    row = expect(member.post(invoices.rows("invoices"), json={"invoice_number": "A-2"}), 201)
    expect(member.patch(f"{invoices.rows('invoices')}/{row['uid']}",
                        json={"vendor_uid": str(uuid.uuid4())}), 409, "CONFLICT")


def test_member_gets_409_referencing_a_row_of_another_org(invoices: AppWorld) -> None:
    north, south = _writer(invoices, "North"), _writer(invoices, "South")
    theirs = expect(south.post(invoices.rows("vendors"), json={"name": "Theirs"}), 201)
    expect(north.post(invoices.rows("invoices"), json={
        "invoice_number": "A-1", "vendor_uid": theirs["uid"]}), 409, "CONFLICT")
    assert _count(invoices, north, "invoices") == 0


def test_member_gets_409_deleting_a_row_another_row_references(invoices: AppWorld) -> None:
    member = _writer(invoices)
    vendor = expect(member.post(invoices.rows("vendors"), json={"name": "Acme"}), 201)
    invoice = expect(member.post(invoices.rows("invoices"), json={
        "invoice_number": "A-1", "vendor_uid": vendor["uid"]}), 201)
    vendor_path = f"{invoices.rows('vendors')}/{vendor['uid']}"
    expect(member.delete(vendor_path), 409, "CONFLICT")
    assert expect(member.get(vendor_path), 200) == vendor
    expect(member.patch(f"{invoices.rows('invoices')}/{invoice['uid']}",
                        json={"vendor_uid": None}), 200)
    assert member.delete(vendor_path).status_code == 204


def test_member_gets_409_for_a_duplicate_unique_value_on_create_and_update(
        invoices: AppWorld) -> None:
    member = _writer(invoices)
    expect(member.post(invoices.rows("invoices"), json={"invoice_number": "A-1"}), 201)
    expect(member.post(invoices.rows("invoices"), json={"invoice_number": "A-1"}), 409, "CONFLICT")
    other = expect(member.post(invoices.rows("invoices"), json={"invoice_number": "A-2"}), 201)
    path = f"{invoices.rows('invoices')}/{other['uid']}"
    expect(member.patch(path, json={"invoice_number": "A-1"}), 409, "CONFLICT")
    assert expect(member.get(path), 200)["invoice_number"] == "A-2"
    assert _count(invoices, member, "invoices") == 2


def test_unique_is_per_org_so_another_org_may_use_the_same_value(invoices: AppWorld) -> None:
    north, south = _writer(invoices, "North"), _writer(invoices, "South")
    expect(north.post(invoices.rows("invoices"), json={"invoice_number": "A-1"}), 201)
    expect(south.post(invoices.rows("invoices"), json={"invoice_number": "A-1"}), 201)


# Org isolation ---------------------------------------------------------------------------

def test_created_rows_belong_to_the_callers_org(invoices: AppWorld) -> None:
    north, colleague, south = (_writer(invoices, "North"), _writer(invoices, "North"),
                               _writer(invoices, "South"))
    row = expect(north.post(invoices.rows("invoices"), json={"invoice_number": "A-1"}), 201)
    assert expect(colleague.get(f"{invoices.rows('invoices')}/{row['uid']}"), 200) == row
    assert expect(south.get(invoices.rows("invoices")), 200)["items"] == []


def test_member_of_another_org_gets_the_same_404_as_for_a_row_that_does_not_exist(
        invoices: AppWorld) -> None:
    north, south = _writer(invoices, "North"), _writer(invoices, "South")
    row = expect(north.post(invoices.rows("invoices"), json={"invoice_number": "A-1"}), 201)
    missing = str(uuid.uuid4())
    for method, body in (("GET", None), ("PATCH", {"status": "stolen"}), ("DELETE", None)):
        theirs = south.request(method, f"{invoices.rows('invoices')}/{row['uid']}", json=body)
        absent = south.request(method, f"{invoices.rows('invoices')}/{missing}", json=body)
        expect(theirs, 404, "NOT_FOUND")
        expect(absent, 404, "NOT_FOUND")
        # the same answer, but for the row's uid and the per-request id
        same = [json.loads(r.text.replace(u, "X")) for r, u in ((theirs, row["uid"]),
                                                                 (absent, missing))]
        for answer in same:
            answer["error"]["details"].pop("requestId", None)
        assert same[0] == same[1]
    assert expect(north.get(f"{invoices.rows('invoices')}/{row['uid']}"), 200) == row


def test_member_of_another_org_never_sees_rows_in_a_list(invoices: AppWorld) -> None:
    north, south = _writer(invoices, "North"), _writer(invoices, "South")
    ours = expect(north.post(invoices.rows("invoices"), json={"invoice_number": "N-1"}), 201)
    expect(south.post(invoices.rows("invoices"), json={"invoice_number": "S-1"}), 201)
    assert expect(north.get(invoices.rows("invoices")), 200)["items"] == [ours]
    for params in ({"uid": ours["uid"]}, {"invoice_number": "N-1"},
                   {"filter": json.dumps({"or": [{"status": "received"},
                                                 {"status": {"ne": "received"}},
                                                 {"status": {"is_null": True}}]})}):
        assert expect(south.get(invoices.rows("invoices"), params=params), 200)["items"] != [ours]
        assert all(r["invoice_number"] == "S-1"
                   for r in south.get(invoices.rows("invoices"), params=params).json()["items"])


# Permissions and table operations --------------------------------------------------------

def _route_calls(world: AppWorld, table: str, uid: str) -> dict[str, tuple[str, str, Any]]:
    base = world.rows(table)
    return {
        "list": ("GET", base, None),
        "read": ("GET", f"{base}/{uid}", None),
        "create": ("POST", base, {"body": "new"}),
        "update": ("PATCH", f"{base}/{uid}", {"body": "changed"}),
        "delete": ("DELETE", f"{base}/{uid}", None),
    }


@pytest.fixture
def notes(world: AppWorld) -> tuple[AppWorld, Caller, str]:
    world.table("notes", [{"name": "body", "type": "text"}])
    world.role("writer", ["notes:*"])
    world.role("nobody", [])
    org = world.org("Northwind")
    writer = world.caller(org, ["writer"])
    row = expect(writer.post(world.rows("notes"), json={"body": "b"}), 201)
    return world, writer, row["uid"]


@pytest.mark.parametrize("operation", ["list", "read", "create", "update", "delete"])
def test_member_without_the_permission_gets_403_forbidden_and_nothing_changes(
        notes: tuple[AppWorld, Caller, str], operation: str) -> None:
    world, writer, uid = notes
    member = world.caller(world.orgs["Northwind"], ["nobody"])
    method, path, body = _route_calls(world, "notes", uid)[operation]
    expect(member.request(method, path, json=body), 403, "FORBIDDEN")
    assert expect(writer.get(world.rows("notes")), 200)["items"][0]["body"] == "b"
    assert _count(world, writer, "notes") == 1


@pytest.mark.parametrize("operation", ["list", "read", "create", "update", "delete"])
def test_member_with_the_permission_gets_403_table_locked_when_the_operation_is_off(
        notes: tuple[AppWorld, Caller, str], operation: str) -> None:
    world, writer, uid = notes
    expect(world.admin.patch(f"{world.base}/tables/notes",
                             json={"operations": {operation: False}}), 200)
    calls = _route_calls(world, "notes", uid)
    method, path, body = calls[operation]
    expect(writer.request(method, path, json=body), 403, "TABLE_LOCKED")
    # Only that operation is off: the others still work.
    for other in ("read", "list"):
        if other != operation:
            m, p, _ = calls[other]
            expect(writer.request(m, p), 200)


@pytest.mark.parametrize("operation", ["list", "read", "create", "update", "delete"])
def test_member_without_the_permission_gets_table_locked_before_forbidden(
        notes: tuple[AppWorld, Caller, str], operation: str) -> None:
    world, _, uid = notes
    expect(world.admin.patch(f"{world.base}/tables/notes",
                             json={"operations": {operation: False}}), 200)
    member = world.caller(world.orgs["Northwind"], ["nobody"])
    method, path, body = _route_calls(world, "notes", uid)[operation]
    expect(member.request(method, path, json=body), 403, "TABLE_LOCKED")


def test_checks_run_in_the_contracts_order(notes: tuple[AppWorld, Caller, str],
                                          http: httpx.Client) -> None:
    world, writer, _ = notes
    member = world.caller(world.orgs["Northwind"], ["nobody"])
    bad_json = {"content": b"{oops", "headers": {"Content-Type": "application/json"}}
    # No token: 401 before anything else, even for a table or app that does not exist.
    expect(http.post(world.rows("ghost"), **bad_json), 401, "UNAUTHENTICATED")
    expect(http.post("/no_such_app_x/autocrud/ghost", **bad_json), 401, "UNAUTHENTICATED")
    # Authenticated: an unknown table is 404 before the permission check.
    expect(member.post(world.rows("ghost"), **bad_json), 404, "NOT_FOUND")
    expect(writer.post(world.rows("ghost"), json={"body": "x"}), 404, "NOT_FOUND")
    # Permission before the request shape.
    expect(member.post(world.rows("notes"), **bad_json), 403, "FORBIDDEN")
    expect(member.post(world.rows("notes"), content=b"body=x",
                       headers={"Content-Type": "text/plain"}), 403, "FORBIDDEN")
    # Table lock before the request shape.
    expect(world.admin.patch(f"{world.base}/tables/notes", json={"operations": {"create": False}}),
           200)
    expect(writer.post(world.rows("notes"), **bad_json), 403, "TABLE_LOCKED")
    expect(writer.post(world.rows("notes"), content=b"body=x",
                       headers={"Content-Type": "text/plain"}), 403, "TABLE_LOCKED")


def test_writer_who_may_not_read_gets_the_uid_alone(notes: tuple[AppWorld, Caller, str]) -> None:
    world, writer, uid = notes
    world.role("drop_box", ["notes:create", "notes:update"])
    member = world.caller(world.orgs["Northwind"], ["drop_box"])
    created = expect(member.post(world.rows("notes"), json={"body": "secret"}), 201)
    assert set(created) == {"uid"}
    assert expect(writer.get(f"{world.rows('notes')}/{created['uid']}"), 200)["body"] == "secret"
    updated = expect(member.patch(f"{world.rows('notes')}/{uid}", json={"body": "edited"}), 200)
    assert updated == {"uid": uid}
    assert expect(writer.get(f"{world.rows('notes')}/{uid}"), 200)["body"] == "edited"


def test_writer_whose_read_operation_is_off_gets_the_uid_alone(
        notes: tuple[AppWorld, Caller, str]) -> None:
    world, writer, _ = notes
    expect(world.admin.patch(f"{world.base}/tables/notes", json={"operations": {"read": False}}),
           200)
    created = expect(writer.post(world.rows("notes"), json={"body": "x"}), 201)
    assert set(created) == {"uid"}


# Request shape ---------------------------------------------------------------------------

@pytest.mark.parametrize("headers,content", [
    ({"Content-Type": "text/plain"}, b'{"body": "x"}'),
    ({"Content-Type": "application/x-www-form-urlencoded"}, b"body=x"),
    ({}, b'{"body": "x"}'),
    ({"Content-Type": "application/jsonp"}, b'{"body": "x"}'),
])
def test_member_gets_415_for_a_body_that_is_not_declared_json_and_nothing_is_written(
        notes: tuple[AppWorld, Caller, str], headers: dict[str, str], content: bytes) -> None:
    world, writer, uid = notes
    expect(writer.post(world.rows("notes"), content=content, headers=headers),
           415, "UNSUPPORTED_MEDIA_TYPE")
    expect(writer.patch(f"{world.rows('notes')}/{uid}", content=content, headers=headers),
           415, "UNSUPPORTED_MEDIA_TYPE")
    assert expect(writer.get(world.rows("notes")), 200)["items"][0]["body"] == "b"
    assert _count(world, writer, "notes") == 1


def test_member_sending_json_with_a_charset_parameter_is_understood(
        notes: tuple[AppWorld, Caller, str]) -> None:
    world, writer, _ = notes
    row = expect(writer.post(world.rows("notes"), content='{"body": "ünï"}'.encode(),
                             headers={"Content-Type": "application/json; charset=utf-8"}), 201)
    assert row["body"] == "ünï"


@pytest.mark.parametrize("content", [b"{oops", b"", b'{"body": "x"', b"\xff\xfe", b"{'body': 1}"])
def test_member_gets_400_for_malformed_json_and_nothing_is_written(
        notes: tuple[AppWorld, Caller, str], content: bytes) -> None:
    world, writer, uid = notes
    headers = {"Content-Type": "application/json"}
    expect(writer.post(world.rows("notes"), content=content, headers=headers), 400, "BAD_REQUEST")
    expect(writer.patch(f"{world.rows('notes')}/{uid}", content=content, headers=headers),
           400, "BAD_REQUEST")
    assert _count(world, writer, "notes") == 1


@pytest.mark.parametrize("body", [["body", "x"], "x", 5, None])
def test_member_gets_422_for_a_body_that_is_not_an_object(
        notes: tuple[AppWorld, Caller, str], body: Any) -> None:
    world, writer, _ = notes
    expect(writer.post(world.rows("notes"), content=json.dumps(body),
                       headers={"Content-Type": "application/json"}), 422, "VALIDATION_FAILED")
    assert _count(world, writer, "notes") == 1


def test_member_gets_422_naming_an_unknown_column_and_nothing_is_written(
        notes: tuple[AppWorld, Caller, str]) -> None:
    world, writer, uid = notes
    resp = writer.post(world.rows("notes"), json={"body": "x", "colour": "red"})
    expect(resp, 422, "VALIDATION_FAILED")
    assert "colour" in json.dumps(resp.json()["error"]["details"])
    expect(writer.patch(f"{world.rows('notes')}/{uid}", json={"body": "y", "colour": "red"}),
           422, "VALIDATION_FAILED")
    assert expect(writer.get(world.rows("notes")), 200)["items"][0]["body"] == "b"
    assert _count(world, writer, "notes") == 1


@pytest.mark.parametrize("field", ["uid", "createdAt", "updatedAt"])
def test_member_gets_422_setting_a_server_field_and_nothing_is_written(
        notes: tuple[AppWorld, Caller, str], field: str) -> None:
    world, writer, uid = notes
    before = expect(writer.get(f"{world.rows('notes')}/{uid}"), 200)
    value = str(uuid.uuid4()) if field == "uid" else "2000-01-01T00:00:00Z"
    resp = writer.post(world.rows("notes"), json={"body": "x", field: value})
    expect(resp, 422, "VALIDATION_FAILED")
    assert field in json.dumps(resp.json()["error"]["details"])
    expect(writer.patch(f"{world.rows('notes')}/{uid}", json={"body": "y", field: value}),
           422, "VALIDATION_FAILED")
    assert expect(writer.get(world.rows("notes")), 200)["items"] == [before]
    if field == "uid":
        expect(writer.get(f"{world.rows('notes')}/{value}"), 404, "NOT_FOUND")


def test_member_gets_422_trying_to_move_a_row_to_another_org(
        notes: tuple[AppWorld, Caller, str]) -> None:
    world, writer, uid = notes
    other = world.org("Contoso")
    for field in ("org", "org_uid", "orgUid"):
        expect(writer.post(world.rows("notes"), json={"body": "x", field: other}),
               422, "VALIDATION_FAILED")
        expect(writer.patch(f"{world.rows('notes')}/{uid}", json={field: other}),
               422, "VALIDATION_FAILED")
    assert _count(world, writer, "notes") == 1


def test_member_gets_413_for_a_body_over_the_limit_and_nothing_is_written(
        notes: tuple[AppWorld, Caller, str]) -> None:
    world, writer, _ = notes
    resp = writer.post(world.rows("notes"), json={"body": "x" * (2 * 1024 * 1024)})
    expect(resp, 413, "PAYLOAD_TOO_LARGE")
    assert _count(world, writer, "notes") == 1
    # A body just under the limit is fine.
    row = expect(writer.post(world.rows("notes"), json={"body": "y" * (512 * 1024)}), 201)
    assert len(row["body"]) == 512 * 1024


def test_member_gets_404_for_a_table_or_app_that_does_not_exist(
        notes: tuple[AppWorld, Caller, str]) -> None:
    world, writer, _ = notes
    expect(writer.get(world.rows("ghost")), 404, "NOT_FOUND")
    expect(writer.post(world.rows("ghost"), json={"body": "x"}), 404, "NOT_FOUND")
    expect(writer.get(f"{world.rows('ghost')}/{uuid.uuid4()}"), 404, "NOT_FOUND")
    expect(writer.get("/no_such_app_y/autocrud/notes"), 404, "NOT_FOUND")


def test_a_value_too_long_for_a_unique_column_is_a_422_not_a_500(world: AppWorld) -> None:
    world.table("codes", [{"name": "code", "type": "text", "unique": True}])
    world.role("clerk", ["codes:*"])
    clerk = world.caller(world.org("North"), ["clerk"])
    rng = random.Random(9000)  # random, so PostgreSQL cannot compress it under the index limit
    code = "".join(rng.choices(string.ascii_letters + string.digits, k=9000))
    refused = expect(clerk.post(world.rows("codes"), json={"code": code}), 422,
                     "VALIDATION_FAILED")
    assert "too large" in refused["error"]["message"]
    assert expect(clerk.get(world.rows("codes")), 200)["items"] == []
