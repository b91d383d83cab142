"""The operator's rows across orgs (contract section 2a): `/admin/apps/{app}/tables/{table}/rows`.

Callers: the operator (admin token) listing, creating, patching, deleting and importing rows
in any org; members of those orgs reading over REST and subscribing, who must see the
operator's writes exactly as they see each other's; and bad inputs, each answered with the
contract's code and writing nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.console_world import Shop, build_shop, error, without_org
from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess
from tests.sse import SSEClient


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
def shop(world: AppWorld) -> Shop:
    return build_shop(world)


# -- reading across orgs ----------------------------------------------------------------------

def test_operator_lists_rows_of_every_org_each_carrying_its_org(shop: Shop) -> None:
    a = shop.invoice()
    b = shop.invoice(shop.south_clerk)
    listed = {r["uid"]: r for r in shop.admin_list()}
    assert set(listed) == {a["uid"], b["uid"]}
    assert listed[a["uid"]]["org"] == shop.north and listed[b["uid"]]["org"] == shop.south
    assert without_org(listed[a["uid"]]) == a  # otherwise the REST row shape, unchanged


def test_operator_narrows_the_listing_to_one_org_with_org_param(shop: Shop) -> None:
    shop.invoice()
    south = shop.invoice(shop.south_clerk)
    assert [r["uid"] for r in shop.admin_list(org=shop.south)] == [south["uid"]]


def test_operator_gets_404_listing_an_org_the_app_does_not_have(shop: Shop) -> None:
    other = AppWorld.create(shop.world.server, shop.admin.client).org("Elsewhere")
    for org in (other, "not-a-uid"):
        error(shop.admin.get(shop.admin_rows(), params={"org": org}), 404, "NOT_FOUND")


def test_operator_filters_orders_and_pages_with_the_autocrud_language(shop: Shop) -> None:
    for n, amount in enumerate(["5.00", "50.00", "500.00", "5000.00"]):
        shop.invoice(shop.north_clerk if n % 2 else shop.south_clerk, amount=amount)
    big = shop.admin_list(**{"amount[gte]": "50", "order": "-amount"})
    assert [r["amount"] for r in big] == ["5000.00", "500.00", "50.00"]
    as_json = shop.admin_list(filter=json.dumps({"or": [{"amount": "5.00"},
                                                        {"amount": "5000.00"}]}), order="amount")
    assert [r["amount"] for r in as_json] == ["5.00", "5000.00"]
    south_only = shop.admin_list(org=shop.south, order="amount")
    assert [r["amount"] for r in south_only] == ["5.00", "500.00"]
    seen: list[str] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1, "order": "amount", **({"after": after} if after else {})}
        page = expect(shop.admin.get(shop.admin_rows(), params=params), 200)
        seen += [r["amount"] for r in page["items"]]
        after = page["next"]
        if after is None:
            break
    assert seen == ["5.00", "50.00", "500.00", "5000.00"]


@pytest.mark.parametrize("params", [
    {"filter": "{not json"}, {"nosuch": "1"}, {"amount[near]": "1"}, {"order": "nosuch"},
    {"limit": "0"}, {"limit": "1001"}, {"after": "garbage"},
])
def test_operator_gets_400_for_a_bad_filter_order_limit_or_cursor(shop: Shop,
                                                                  params: dict[str, str]) -> None:
    error(shop.admin.get(shop.admin_rows(), params=params), 400, "BAD_REQUEST")


def test_operator_sees_rows_and_columns_a_members_policy_hides(shop: Shop) -> None:
    draft = shop.invoice(status="draft", amount="12.00")
    viewer = shop.world.login(shop.member(shop.north, ["viewer"]), shop.north)
    assert draft["uid"] not in {r["uid"] for r in shop.member_list(viewer)}
    row = expect(shop.admin.get(f"{shop.admin_rows()}/{draft['uid']}"), 200)
    assert row["status"] == "draft" and row["amount"] == "12.00" and row["org"] == shop.north


def test_operator_gets_404_for_a_row_that_does_not_exist_or_an_unknown_table(shop: Shop) -> None:
    missing = "0190f1b2-0000-7000-8000-000000000001"
    error(shop.admin.get(f"{shop.admin_rows()}/{missing}"), 404, "NOT_FOUND")
    error(shop.admin.get(f"{shop.admin_rows()}/not-a-uid"), 404, "NOT_FOUND")
    error(shop.admin.get(shop.admin_rows("nosuch")), 404, "NOT_FOUND")
    error(shop.admin.get("/admin/apps/nosuchapp/tables/invoices/rows"), 404, "NOT_FOUND")


def test_operator_ignores_operation_switches(shop: Shop) -> None:
    off = {k: False for k in ("list", "read", "create", "update", "delete")}
    expect(shop.admin.patch(f"{shop.base}/tables/invoices", json={"operations": off}), 200)
    error(shop.north_clerk.get(shop.world.rows("invoices")), 403, "TABLE_LOCKED")
    row = shop.admin_invoice(shop.north, amount="1.00")
    assert row["amount"] == "1.00"  # the whole row back, though `read` is off for members
    assert [r["uid"] for r in shop.admin_list()] == [row["uid"]]
    patched = expect(shop.admin.patch(f"{shop.admin_rows()}/{row['uid']}",
                                      json={"amount": "2.00"}), 200)
    assert patched["amount"] == "2.00"
    expect(shop.admin.delete(f"{shop.admin_rows()}/{row['uid']}"), 204)
    assert shop.admin_list() == []


# -- writing into an org --------------------------------------------------------------------------

def test_operator_creates_a_row_in_the_chosen_org_and_only_that_org_sees_it(shop: Shop) -> None:
    row = shop.admin_invoice(shop.south, amount="8760.00")
    assert row["org"] == shop.south and row["status"] == "received"  # defaults filled in
    seen = expect(shop.south_clerk.get(f"{shop.world.rows('invoices')}/{row['uid']}"), 200)
    assert seen == without_org(row)
    error(shop.north_clerk.get(f"{shop.world.rows('invoices')}/{row['uid']}"), 404, "NOT_FOUND")


def test_operator_patches_and_deletes_a_row_of_any_org(shop: Shop) -> None:
    row = shop.invoice(shop.south_clerk, note="before")
    patched = expect(shop.admin.patch(f"{shop.admin_rows()}/{row['uid']}",
                                      json={"note": "after"}), 200)
    assert patched["note"] == "after" and patched["org"] == shop.south
    assert expect(shop.south_clerk.get(f"{shop.world.rows('invoices')}/{row['uid']}"),
                  200)["note"] == "after"
    expect(shop.admin.delete(f"{shop.admin_rows()}/{row['uid']}"), 204)
    error(shop.south_clerk.get(f"{shop.world.rows('invoices')}/{row['uid']}"), 404, "NOT_FOUND")
    error(shop.admin.delete(f"{shop.admin_rows()}/{row['uid']}"), 404, "NOT_FOUND")


def test_operator_soft_deletes_on_a_soft_delete_table(shop: Shop) -> None:
    shop.world.table("notes", [{"name": "body", "type": "text"}], softDelete=True)
    row = expect(shop.admin.post(shop.admin_rows("notes"), json={"org": shop.north,
                                                                  "body": "x"}), 201)
    expect(shop.admin.delete(f"{shop.admin_rows('notes')}/{row['uid']}"), 204)
    assert expect(shop.admin.get(shop.admin_rows("notes")), 200)["items"] == []
    error(shop.admin.get(f"{shop.admin_rows('notes')}/{row['uid']}"), 404, "NOT_FOUND")


def test_operator_writes_record_the_same_change_log_entries_as_rest(
        shop: Shop, database_url: str) -> None:
    rest = shop.invoice()
    expect(shop.north_clerk.patch(f"{shop.world.rows('invoices')}/{rest['uid']}",
                                  json={"note": "n"}), 200)
    expect(shop.north_clerk.delete(f"{shop.world.rows('invoices')}/{rest['uid']}"), 204)
    admin = shop.admin_invoice(shop.north)
    expect(shop.admin.patch(f"{shop.admin_rows()}/{admin['uid']}", json={"note": "n"}), 200)
    expect(shop.admin.delete(f"{shop.admin_rows()}/{admin['uid']}"), 204)
    entries = shop.log_entries(database_url)
    by_rest = [(t, op, org) for t, op, uid, org in entries if uid == rest["uid"]]
    by_admin = [(t, op, org) for t, op, uid, org in entries if uid == admin["uid"]]
    assert by_rest == by_admin == [("invoices", "insert", shop.north),
                                   ("invoices", "update", shop.north),
                                   ("invoices", "delete", shop.north)]


def test_member_subscribed_over_rest_receives_the_operators_insert_update_and_delete(
        shop: Shop) -> None:
    viewer = shop.world.login(shop.member(shop.north, ["viewer"]), shop.north)
    with SSEClient(shop.world.server.url, f"{shop.world.rows('invoices')}/subscribe",
                   viewer.token) as stream:
        assert stream.status_code == 200, stream.body
        stream.wait_connected()
        hidden = shop.admin_invoice(shop.north, status="draft")
        other_org = shop.admin_invoice(shop.south)
        row = shop.admin_invoice(shop.north, amount="9.00")
        inserted = stream.wait_for_change(row["uid"], "insert").data["row"]
        assert inserted["amount"] == "[redacted]" and "org" not in inserted
        expect(shop.admin.patch(f"{shop.admin_rows()}/{row['uid']}", json={"note": "x"}), 200)
        assert stream.wait_for_change(row["uid"], "update").data["row"]["note"] == "x"
        expect(shop.admin.delete(f"{shop.admin_rows()}/{row['uid']}"), 204)
        stream.wait_for_change(row["uid"], "delete")
        sent = {f.row_uid for f in stream.changes()}
        assert hidden["uid"] not in sent and other_org["uid"] not in sent


# -- bad input writes nothing ---------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    {"number": "X-1"},                                   # no org
    {"org": 7, "number": "X-1"},                         # org not a uid string
    {"org": "not-a-uid", "number": "X-1"},
    {"org": "0190f1b2-0000-7000-8000-000000000002", "number": "X-1"},  # no such org
])
def test_operator_gets_422_creating_a_row_without_a_valid_org_and_nothing_is_written(
        shop: Shop, body: dict[str, Any]) -> None:
    details = error(shop.admin.post(shop.admin_rows(), json=body), 422, "VALIDATION_FAILED")
    assert details["errors"][0]["column"] == "org"
    assert shop.admin_list() == []


def test_operator_gets_422_for_an_org_of_another_app(shop: Shop) -> None:
    other = AppWorld.create(shop.world.server, shop.admin.client).org("Elsewhere")
    error(shop.admin.post(shop.admin_rows(), json={"org": other, "number": "X"}), 422,
          "VALIDATION_FAILED")
    assert shop.admin_list() == []


@pytest.mark.parametrize(("body", "column"), [
    ({"amount": "12.00"}, "number"),                     # a required column missing
    ({"number": "X", "amount": "lots"}, "amount"),       # a value of the wrong type
    ({"number": "X", "nosuch": 1}, "nosuch"),            # an unknown column
])
def test_operator_gets_the_same_422_details_as_rest_and_nothing_is_written(
        shop: Shop, body: dict[str, Any], column: str) -> None:
    details = error(shop.admin.post(shop.admin_rows(), json={"org": shop.north, **body}), 422,
                    "VALIDATION_FAILED")
    rest = error(shop.north_clerk.post(shop.world.rows("invoices"), json=body), 422,
                 "VALIDATION_FAILED")
    assert details["errors"] == rest["errors"]
    assert column in {e["column"] for e in details["errors"]}
    assert shop.admin_list() == []


@pytest.mark.parametrize("field", ["uid", "createdAt", "org_uid"])
def test_operator_gets_422_setting_a_server_field_and_nothing_is_written(
        shop: Shop, field: str) -> None:
    body = {"org": shop.north, "number": "X", field: "0190f1b2-0000-7000-8000-000000000003"}
    error(shop.admin.post(shop.admin_rows(), json=body), 422, "VALIDATION_FAILED")
    assert shop.admin_list() == []


def test_operator_cannot_move_a_row_to_another_org(shop: Shop) -> None:
    row = shop.invoice()
    error(shop.admin.patch(f"{shop.admin_rows()}/{row['uid']}", json={"org": shop.south}), 422,
          "VALIDATION_FAILED")
    assert [r["org"] for r in shop.admin_list()] == [shop.north]


def test_operator_gets_409_for_a_duplicate_or_a_reference_into_another_org(shop: Shop) -> None:
    shop.invoice(number="DUP")
    error(shop.admin.post(shop.admin_rows(), json={"org": shop.north, "number": "DUP"}), 409,
          "CONFLICT")
    vendor = expect(shop.admin.post(shop.admin_rows("vendors"),
                                    json={"org": shop.south, "name": "Acme"}), 201)
    error(shop.admin.post(shop.admin_rows(), json={"org": shop.north, "number": "R",
                                                   "vendor_uid": vendor["uid"]}), 409, "CONFLICT")
    ok = expect(shop.admin.post(shop.admin_rows(), json={"org": shop.south, "number": "R",
                                                         "vendor_uid": vendor["uid"]}), 201)
    assert ok["vendor_uid"] == vendor["uid"]
    assert sorted(r["number"] for r in shop.admin_list()) == ["DUP", "R"]


def test_operator_gets_415_and_400_for_a_body_that_is_not_json(shop: Shop) -> None:
    error(shop.admin.post(shop.admin_rows(), content=b"number=1",
                          headers={"Content-Type": "text/plain"}), 415, "UNSUPPORTED_MEDIA_TYPE")
    error(shop.admin.post(shop.admin_rows(), content=b"{",
                          headers={"Content-Type": "application/json"}), 400, "BAD_REQUEST")
    assert shop.admin_list() == []


# -- CSV import into an org -----------------------------------------------------------------------

def _import(shop: Shop, body: str, **params: str) -> Any:
    return shop.admin.post(f"{shop.admin_rows()}/import", params=params, content=body.encode(),
                           headers={"Content-Type": "text/csv"})


def test_operator_imports_a_csv_into_the_chosen_org(shop: Shop) -> None:
    body = expect(_import(shop, "number,amount\nC-1,1.50\nC-2,2.50\n", org=shop.south), 201)
    assert body == {"inserted": 2}
    rows = shop.admin_list(order="number")
    assert [(r["number"], r["amount"], r["org"]) for r in rows] == [
        ("C-1", "1.50", shop.south), ("C-2", "2.50", shop.south)]
    assert len(shop.member_list(shop.south_clerk)) == 2 and shop.member_list(shop.north_clerk) == []


def test_operator_import_with_a_bad_line_names_line_and_column_and_writes_nothing(shop: Shop) -> None:
    details = error(_import(shop, "number,amount\nC-1,1.50\nC-2,lots\n", org=shop.north), 422,
                    "VALIDATION_FAILED")
    assert [(r["line"], r["column"]) for r in details["rows"]] == [(3, "amount")]
    assert shop.admin_list() == []


def test_operator_import_needs_a_known_org_and_a_csv_body(shop: Shop) -> None:
    error(_import(shop, "number\nC-1\n"), 422, "VALIDATION_FAILED")
    error(_import(shop, "number\nC-1\n", org="0190f1b2-0000-7000-8000-000000000002"), 404,
          "NOT_FOUND")
    error(shop.admin.post(f"{shop.admin_rows()}/import", params={"org": shop.north},
                          json={"number": "C-1"}), 415, "UNSUPPORTED_MEDIA_TYPE")
    assert shop.admin_list() == []


def test_member_subscribed_receives_one_insert_per_imported_row(shop: Shop) -> None:
    with SSEClient(shop.world.server.url, f"{shop.world.rows('invoices')}/subscribe",
                   shop.north_clerk.token) as stream:
        stream.wait_connected()
        expect(_import(shop, "number\nC-1\nC-2\n", org=shop.north), 201)
        stream.wait_until(lambda fs: len([f for f in fs if f.is_change]) >= 2)
        assert sorted(f.data["row"]["number"] for f in stream.changes()) == ["C-1", "C-2"]
