"""Listing rows (contract section 4): filters, order, limit and keyset cursors.

Callers: a member who may list, a member whose role redacts a column, and members whose
pages are interleaved with other members' inserts and deletes.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect, unique
from tests.servers import ServerProcess

ROWS = [
    # number, status, amount, qty, paid, due_on, note
    ("A-1", "received", "100.00", 1, False, "2026-01-10", None),
    ("A-2", "approved", "9.50", 5, True, "2026-02-01", "rush"),
    ("B-1", "received", "1000", 10, False, "2026-01-31", None),
    ("B-2", "draft", "10", 2, False, None, "check vendor"),
    ("C-1", "paid", "250.25", 7, True, "2026-03-15", "ok"),
    ("C-2", "approved", None, 3, True, "2026-01-01", None),
    ("D-1", "received", "99.99", 4, False, "2026-02-28", "rush"),
]
# One json value per row: strings, objects, arrays, numbers and nulls, so ordering by it pages.
META = ["zeta", {"k": 1}, None, [1, 2], "alpha", 5, None]


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    """Whatever a test does, the server never logs a traceback (an unexpected error)."""
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


class Book:
    """An app with seeded invoices in one org, a member who may do everything there."""

    def __init__(self, world: AppWorld) -> None:
        self.world = world
        world.table("vendors", [{"name": "name", "type": "text"}])
        world.table("invoices", [
            {"name": "number", "type": "text", "unique": True},
            {"name": "status", "type": "text"},
            {"name": "amount", "type": "numeric"},
            {"name": "qty", "type": "integer"},
            {"name": "paid", "type": "boolean"},
            {"name": "due_on", "type": "date"},
            {"name": "note", "type": "text"},
            {"name": "meta", "type": "json"},
            {"name": "vendor", "type": "reference", "references": "vendors"},
        ])
        world.role("writer", ["*:*"])
        self.org = world.org("Northwind")
        self.member = world.caller(self.org, ["writer"])
        self.vendor = expect(self.member.post(world.rows("vendors"), json={"name": "Acme"}), 201)
        self.rows = []
        for (number, status, amount, qty, paid, due_on, note), meta in zip(ROWS, META, strict=True):
            body = {"number": number, "status": status, "amount": amount, "qty": qty,
                    "paid": paid, "due_on": due_on, "note": note, "meta": meta,
                    "vendor_uid": self.vendor["uid"] if number.startswith("A") else None}
            self.rows.append(expect(self.member.post(self.url, json=body), 201))

    @property
    def url(self) -> str:
        return self.world.rows("invoices")

    def list(self, caller: Caller | None = None, **params: Any) -> dict[str, Any]:
        return dict(expect((caller or self.member).get(self.url, params=params), 200))

    def numbers(self, **params: Any) -> list[str]:
        return [r["number"] for r in self.list(**params)["items"]]

    def pages(self, caller: Caller | None = None, **params: Any) -> list[list[dict[str, Any]]]:
        out, cursor = [], None
        while True:
            page = self.list(caller, **params, **({"after": cursor} if cursor else {}))
            out.append(page["items"])
            cursor = page["next"]
            if cursor is None:
                return out
            assert len(out) < 100, "pagination does not end"


@pytest.fixture(scope="module")
def book(server: ServerProcess, http: httpx.Client) -> Book:
    """One seeded app shared by the tests that only read it (they never write its rows)."""
    return Book(AppWorld.create(server, http))


@pytest.fixture
def fresh_book(world: AppWorld) -> Book:
    """A seeded app of its own, for a test that writes rows."""
    return Book(world)


def _matching(pred: Any) -> list[str]:
    return sorted(r[0] for r in ROWS if pred(*r))


def _cursor(doc: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


# Filters in the query string -------------------------------------------------------------

@pytest.mark.parametrize("params,pred", [
    ({"status": "received"}, lambda n, s, a, q, p, d, note: s == "received"),
    ({"status[eq]": "draft"}, lambda n, s, a, q, p, d, note: s == "draft"),
    ({"status[ne]": "received"}, lambda n, s, a, q, p, d, note: s != "received"),
    ({"amount[gte]": "100"}, lambda n, s, a, q, p, d, note: a is not None and Decimal(a) >= 100),
    ({"amount[lt]": "99.99"}, lambda n, s, a, q, p, d, note: a is not None and Decimal(a) < Decimal(
        "99.99")),
    ({"amount[lte]": "99.99"}, lambda n, s, a, q, p, d, note: a is not None and Decimal(
        a) <= Decimal("99.99")),
    ({"qty[gt]": "4"}, lambda n, s, a, q, p, d, note: q > 4),
    ({"qty": "10"}, lambda n, s, a, q, p, d, note: q == 10),
    ({"paid": "true"}, lambda n, s, a, q, p, d, note: p),
    ({"paid": "false"}, lambda n, s, a, q, p, d, note: not p),
    ({"due_on[gte]": "2026-02-01"}, lambda n, s, a, q, p, d, note: d is not None and d >= "2026-02-01"),
    ({"status[in]": "draft,paid"}, lambda n, s, a, q, p, d, note: s in ("draft", "paid")),
    ({"status[nin]": "draft,paid"}, lambda n, s, a, q, p, d, note: s not in ("draft", "paid")),
    ({"number[like]": "B-%"}, lambda n, s, a, q, p, d, note: n.startswith("B-")),
    ({"note[is_null]": "true"}, lambda n, s, a, q, p, d, note: note is None),
    ({"note[is_null]": "false"}, lambda n, s, a, q, p, d, note: note is not None),
    ({"status": "received", "qty[lt]": "5"}, lambda n, s, a, q, p, d, note: s == "received" and q < 5),
    ({"amount[gt]": "10", "amount[lt]": "250.25"},
     lambda n, s, a, q, p, d, note: a is not None and 10 < Decimal(a) < Decimal("250.25")),
])
def test_member_filters_with_query_string_terms(book: Book, params: dict[str, str],
                                                pred: Any) -> None:
    assert sorted(book.numbers(**params)) == _matching(pred)


def test_member_filters_on_a_reference_by_either_of_its_names(book: Book) -> None:
    wanted = _matching(lambda n, *_: n.startswith("A"))
    assert sorted(book.numbers(vendor_uid=book.vendor["uid"])) == wanted
    assert sorted(book.numbers(vendor=book.vendor["uid"])) == wanted
    assert sorted(book.numbers(**{"vendor_uid[is_null]": "true"})) == _matching(
        lambda n, *_: not n.startswith("A"))


def test_member_filters_on_platform_fields(book: Book) -> None:
    third = book.rows[2]
    assert book.numbers(uid=third["uid"]) == [third["number"]]
    later = book.numbers(**{"createdAt[gt]": third["createdAt"]})
    assert later == [r["number"] for r in book.rows[3:]]


def test_filter_values_are_data_never_sql(book: Book) -> None:
    for value in ("' OR '1'='1", "received' --", "A-1'; DROP TABLE invoices; --", "%"):
        assert book.numbers(number=value) == []
        assert book.numbers(filter=json.dumps({"status": {"in": [value]}})) == []
    assert book.numbers(**{"number[like]": "%' OR 1=1 --"}) == []
    assert len(book.numbers()) == len(ROWS)


# Filters as JSON -------------------------------------------------------------------------

@pytest.mark.parametrize("doc,pred", [
    ({"status": "received"}, lambda n, s, a, q, p, d, note: s == "received"),
    ({"and": [{"status": "received"}, {"qty": {"gte": 4}}]},
     lambda n, s, a, q, p, d, note: s == "received" and q >= 4),
    ({"or": [{"status": "draft"}, {"paid": True}]},
     lambda n, s, a, q, p, d, note: s == "draft" or p),
    ({"not": {"status": "received"}}, lambda n, s, a, q, p, d, note: s != "received"),
    ({"not": {"or": [{"status": "received"}, {"qty": {"lt": 3}}]}},
     lambda n, s, a, q, p, d, note: not (s == "received" or q < 3)),
    ({"or": [{"and": [{"paid": True}, {"amount": {"gt": "100"}}]}, {"note": {"eq": "rush"}}]},
     lambda n, s, a, q, p, d, note: (p and a is not None and Decimal(a) > 100) or note == "rush"),
    ({"qty": {"in": [1, 2, 3]}}, lambda n, s, a, q, p, d, note: q in (1, 2, 3)),
    ({"qty": {"nin": [1, 2, 3]}}, lambda n, s, a, q, p, d, note: q not in (1, 2, 3)),
    ({"qty": {"gte": 2, "lte": 5}}, lambda n, s, a, q, p, d, note: 2 <= q <= 5),
    ({"amount": {"is_null": True}}, lambda n, s, a, q, p, d, note: a is None),
    ({"note": None}, lambda n, s, a, q, p, d, note: note is None),
    ({"note": {"ne": None}}, lambda n, s, a, q, p, d, note: note is not None),
    ({"number": {"like": "%-2"}}, lambda n, s, a, q, p, d, note: n.endswith("-2")),
    ({}, lambda *_: True),
])
def test_member_filters_with_a_json_filter(book: Book, doc: dict[str, Any], pred: Any) -> None:
    assert sorted(book.numbers(filter=json.dumps(doc))) == _matching(pred)


def test_query_string_terms_and_a_json_filter_apply_together(book: Book) -> None:
    got = book.numbers(status="received", filter=json.dumps({"or": [{"qty": 1}, {"qty": 4}]}))
    assert sorted(got) == ["A-1", "D-1"]


@pytest.mark.parametrize("params", [
    {"colour": "red"},
    {"colour[eq]": "red"},
    {"status[between]": "a"},
    {"status[]": "a"},
    {"qty": "many"},
    {"qty[gt]": "1.5"},
    {"amount[gte]": "lots"},
    {"paid": "perhaps"},
    {"due_on": "2026-02-30"},
    {"uid": "not-a-uid"},
    {"createdAt[gt]": "yesterday"},
    {"qty[like]": "1%"},
    {"note[is_null]": "maybe"},
    {"filter": "{not json"},
    {"filter": "[1, 2]"},
    {"filter": '"status"'},
    {"filter": '{"colour": "red"}'},
    {"filter": '{"status": {"regex": ".*"}}'},
    {"filter": '{"and": []}'},
    {"filter": '{"or": {"status": "x"}}'},
    {"filter": '{"not": "status"}'},
    {"filter": '{"qty": {"gt": null}}'},
    {"filter": '{"qty": {"in": [1, null]}}'},
    {"filter": '{"qty": {"in": 5}}'},
    {"filter": '{"status": {}}'},
    {"filter": '{"meta": {"gt": 1}}'},
])
def test_member_gets_400_for_an_unknown_column_operator_or_bad_value_in_a_filter(
        book: Book, params: dict[str, str]) -> None:
    expect(book.member.get(book.url, params=params), 400, "BAD_REQUEST")


def test_member_gets_400_for_a_filter_nested_too_deep(book: Book) -> None:
    doc: dict[str, Any] = {"status": "received"}
    for _ in range(50):
        doc = {"not": doc}
    expect(book.member.get(book.url, params={"filter": json.dumps(doc)}), 400, "BAD_REQUEST")


# Order -----------------------------------------------------------------------------------

def test_default_order_is_by_uid_which_is_creation_order(book: Book) -> None:
    items = book.list()["items"]
    assert [r["uid"] for r in items] == [r["uid"] for r in book.rows]
    assert [r["uid"] for r in items] == sorted(r["uid"] for r in book.rows)


def test_member_orders_by_created_at_descending(book: Book) -> None:
    assert book.numbers(order="-createdAt") == [r["number"] for r in reversed(book.rows)]


def test_member_orders_numerics_by_value_not_as_text_with_nulls_last(book: Book) -> None:
    by_amount = sorted((r for r in ROWS if r[2] is not None), key=lambda r: Decimal(r[2]))
    assert book.numbers(order="amount") == [r[0] for r in by_amount] + ["C-2"]
    assert book.numbers(order="-amount") == [r[0] for r in reversed(by_amount)] + ["C-2"]


def test_member_orders_by_text_date_and_integer_columns(book: Book) -> None:
    assert book.numbers(order="-number") == sorted((r[0] for r in ROWS), reverse=True)
    assert book.numbers(order="qty") == [r[0] for r in sorted(ROWS, key=lambda r: r[3])]
    dated = sorted((r for r in ROWS if r[5]), key=lambda r: str(r[5]))
    assert book.numbers(order="due_on") == [r[0] for r in dated] + ["B-2"]


def test_rows_that_tie_on_the_order_column_come_in_uid_order(book: Book) -> None:
    received = [r["number"] for r in book.rows if r["status"] == "received"]
    got = book.numbers(order="status")
    assert [n for n in got if n in received] == received
    got_desc = book.numbers(order="-status")
    assert [n for n in got_desc if n in received] == list(reversed(received))


@pytest.mark.parametrize("order", ["colour", "-colour", "--amount", "amount desc", "org_uid"])
def test_member_gets_400_ordering_by_an_unknown_column(book: Book, order: str) -> None:
    expect(book.member.get(book.url, params={"order": order}), 400, "BAD_REQUEST")


# Limit -----------------------------------------------------------------------------------

def test_limit_caps_the_page_and_next_is_null_on_the_last_page(book: Book) -> None:
    first = book.list(limit=1)
    assert [r["uid"] for r in first["items"]] == [book.rows[0]["uid"]]
    assert isinstance(first["next"], str) and first["next"]
    whole = book.list(limit=len(ROWS))
    assert len(whole["items"]) == len(ROWS) and whole["next"] is None
    assert book.list(limit=1000)["next"] is None


def test_the_default_limit_is_50(world: AppWorld) -> None:
    world.table("ticks", [{"name": "n", "type": "integer"}])
    world.role("writer", ["ticks:*"])
    member = world.caller(world.org("O"), ["writer"])
    for n in range(51):
        expect(member.post(world.rows("ticks"), json={"n": n}), 201)
    page = expect(member.get(world.rows("ticks")), 200)
    assert [r["n"] for r in page["items"]] == list(range(50))
    rest = expect(member.get(world.rows("ticks"), params={"after": page["next"]}), 200)
    assert [r["n"] for r in rest["items"]] == [50] and rest["next"] is None


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "abc", "", "1.5", "99999999999999999999"])
def test_member_gets_400_for_a_limit_outside_1_to_1000(book: Book, limit: str) -> None:
    expect(book.member.get(book.url, params={"limit": limit}), 400, "BAD_REQUEST")


# Keyset cursors --------------------------------------------------------------------------

@pytest.mark.parametrize("order", [None, "-createdAt", "amount", "-amount", "status", "-status",
                                   "note", "-note", "due_on", "paid", "qty", "-uid", "meta"])
def test_walking_every_page_yields_each_row_exactly_once_in_order(book: Book,
                                                                  order: str | None) -> None:
    params = {"order": order} if order else {}
    whole = book.list(limit=1000, **params)["items"]
    for limit in (1, 2, 3):
        pages = book.pages(limit=limit, **params)
        assert all(len(p) <= limit for p in pages)
        assert [r for page in pages for r in page] == whole


def test_pages_respect_the_filter(book: Book) -> None:
    pages = book.pages(limit=1, status="received", order="-amount")
    assert [r["number"] for p in pages for r in p] == ["B-1", "A-1", "D-1"]


def test_pagination_is_stable_while_others_insert_and_delete_between_pages(
        fresh_book: Book) -> None:
    book = fresh_book
    other = book.world.caller(book.org, ["writer"])
    for order in (None, "amount", "-createdAt", "status"):
        params = {"order": order} if order else {}
        before = book.list(limit=1000, **params)["items"]
        first = book.list(limit=2, **params)
        seen = list(first["items"])
        unseen = [r for r in before if r not in seen]
        # Between pages: one seen row and one not-yet-seen row go; new rows arrive.
        assert other.delete(f"{book.url}/{seen[0]['uid']}").status_code == 204
        assert other.delete(f"{book.url}/{unseen[1]['uid']}").status_code == 204
        added = [expect(other.post(book.url, json={"number": f"N-{uuid.uuid4().hex[:6]}",
                                                   "status": "received", "amount": amount}), 201)
                 for amount in ("0.01", "5000", None)]
        cursor = first["next"]
        while cursor:
            page = book.list(limit=2, after=cursor, **params)
            seen += page["items"]
            cursor = page["next"]
        uids = [r["uid"] for r in seen]
        assert len(uids) == len(set(uids)), "a row was listed twice"
        survivors = [r["uid"] for r in unseen if r["uid"] != unseen[1]["uid"]]
        assert [u for u in uids if u in survivors] == survivors, "a surviving row was skipped"
        assert unseen[1]["uid"] not in uids
        # Put the table back as it was for the next ordering.
        for row in added:
            assert other.delete(f"{book.url}/{row['uid']}").status_code == 204
        for row in (seen[0], unseen[1]):
            body = {k: v for k, v in row.items() if k not in ("uid", "createdAt", "updatedAt")}
            expect(other.post(book.url, json=body), 201)


@pytest.mark.parametrize("after", [
    "garbage", "!!!", _cursor([1, 2]), _cursor({"o": "uid"}), _cursor({"v": None, "u": "x"}),
    base64.urlsafe_b64encode(b"not json").decode(),
])
def test_member_gets_400_for_a_cursor_the_server_did_not_make(book: Book, after: str) -> None:
    expect(book.member.get(book.url, params={"after": after}), 400, "BAD_REQUEST")


@pytest.mark.parametrize("order,value", [
    ("number", 5), ("number", ["A"]), ("qty", "many"), ("qty", {"n": 1}), ("amount", "lots"),
    ("amount", True), ("createdAt", 5), ("due_on", "2026-02-30"), ("paid", "perhaps"),
    ("uid", "not-a-uid"),
])
def test_member_gets_400_for_a_cursor_whose_value_does_not_fit_the_order_column(
        book: Book, order: str, value: Any) -> None:
    after = _cursor({"o": order, "v": value, "u": str(uuid.uuid4())})
    expect(book.member.get(book.url, params={"order": order, "after": after}), 400, "BAD_REQUEST")


def test_member_gets_400_using_a_cursor_with_another_order(book: Book) -> None:
    cursor = book.list(limit=1, order="amount")["next"]
    expect(book.member.get(book.url, params={"order": "-amount", "after": cursor}),
           400, "BAD_REQUEST")
    expect(book.member.get(book.url, params={"after": cursor}), 400, "BAD_REQUEST")


def test_a_cursor_from_another_org_reveals_nothing(book: Book) -> None:
    cursor = book.list(limit=1)["next"]
    stranger = book.world.caller(book.world.org(unique("Contoso")), ["writer"])
    assert expect(stranger.get(book.url, params={"after": cursor}), 200)["items"] == []


# Org, redaction ---------------------------------------------------------------------------

def test_a_member_of_another_org_lists_none_of_these_rows(book: Book) -> None:
    stranger = book.world.caller(book.world.org(unique("Contoso")), ["writer"])
    assert book.list(stranger) == {"items": [], "next": None}
    assert book.list(stranger, filter=json.dumps({"or": [{"status": {"is_null": True}},
                                                         {"status": {"is_null": False}}]}),
                     limit=1000)["items"] == []


def test_member_who_sees_a_column_redacted_cannot_filter_or_order_by_it(book: Book) -> None:
    book.world.role(clerk_role := unique("clerk"), ["invoices:read_list", "invoices:read"],
                    redact={"invoices": ["amount"]})
    clerk = book.world.caller(book.org, [clerk_role])
    items = book.list(clerk)["items"]
    assert len(items) == len(ROWS) and all(r["amount"] == "[redacted]" for r in items)
    for params in ({"amount[gt]": "100"}, {"filter": json.dumps({"amount": {"is_null": True}})},
                   {"order": "amount"}, {"order": "-amount"}):
        expect(clerk.get(book.url, params=params), 400, "BAD_REQUEST")
    assert len(book.list(clerk, status="received")["items"]) == 3
