"""Expand and count (contract section 4): each expanded row judged by its own table's governed
read for the same member, one statement per expanded path; totals on the same governed
predicate as the page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server
from tests.sse import SSEClient

HEADER = "x-authoric-round-trips"


@pytest.fixture(scope="module")
def counting(database_url: str, data_dir: Path) -> Iterator[ServerProcess]:
    """A server that says, on each response, how many statements its request sent."""
    proc = start_server(database_url, data_dir, AUTHORIC_TEST_COUNT_ROUND_TRIPS="1")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def counting_http(counting: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=counting.url, timeout=30) as client:
        yield client


@dataclass
class Shop:
    world: AppWorld
    org: str
    clerk: Caller  # every permission on every table
    countries: dict[str, str]
    vendors: dict[str, str]

    def invoice(self, caller: Caller | None = None, **values: object) -> dict[str, object]:
        got = expect((caller or self.clerk).post(self.world.rows("invoices"), json=values), 201)
        return dict(got)


@pytest.fixture
def shop(counting: ServerProcess, counting_http: httpx.Client) -> Shop:
    """countries ← vendors ← invoices, in one org; `hidden` is a vendor a row policy hides."""
    world = AppWorld.create(counting, counting_http)
    world.table("countries", [{"name": "name", "type": "text"}])
    world.table("vendors", [{"name": "name", "type": "text", "required": True, "unique": True},
                            {"name": "status", "type": "text"},
                            {"name": "iban", "type": "text"},
                            {"name": "country", "type": "reference", "references": "countries"}])
    world.table("invoices", [{"name": "number", "type": "text"},
                             {"name": "vendor", "type": "reference", "references": "vendors"},
                             {"name": "amount", "type": "numeric"}])
    world.role("clerk", ["*:*"])
    org = world.org("North")
    clerk = world.caller(org, ["clerk"])
    countries = {n: expect(clerk.post(world.rows("countries"), json={"name": n}), 201)["uid"]
                 for n in ("France", "Japan")}
    vendors = {}
    for name, status, country in (("acme", "active", "France"), ("zen", "active", "Japan"),
                                  ("hidden", "blocked", "France")):
        vendors[name] = expect(clerk.post(world.rows("vendors"), json={
            "name": name, "status": status, "iban": f"FR-{name}",
            "country_uid": countries[country]}), 201)["uid"]
    return Shop(world, org, clerk, countries, vendors)


def member(shop: Shop, permissions: list[str], **kw: object) -> Caller:
    name = f"r{len(permissions)}_{abs(hash(str(permissions) + str(kw))) % 10**8}"
    shop.world.role(name, permissions, **kw)  # type: ignore[arg-type]
    return shop.world.caller(shop.org, [name])


# Expand -------------------------------------------------------------------------------------

def test_a_list_expands_each_reference_through_the_referenced_tables_governed_read(
        shop: Shop) -> None:
    reader = member(shop, ["invoices:read_list", "invoices:read", "vendors:read"],
                    row_policies={"vendors": {"status": {"eq": "active"}}},
                    redact={"vendors": ["iban"]})
    shown = shop.invoice(number="A-1", vendor_uid=shop.vendors["acme"])
    hidden = shop.invoice(number="A-2", vendor_uid=shop.vendors["hidden"])
    empty = shop.invoice(number="A-3")
    got = expect(reader.get(shop.world.rows("invoices"), params={"expand": "vendor"}), 200)
    by_uid = {r["uid"]: r for r in got["items"]}
    vendor = by_uid[shown["uid"]]["expand"]["vendor"]
    assert vendor["uid"] == shop.vendors["acme"] and vendor["name"] == "acme"
    assert vendor["iban"] == "[redacted]"
    assert by_uid[hidden["uid"]]["expand"] == {"vendor": None}
    assert by_uid[hidden["uid"]]["vendor_uid"] == shop.vendors["hidden"]  # the uid stays
    assert by_uid[empty["uid"]]["expand"] == {"vendor": None}


def test_without_read_on_the_referenced_table_or_with_its_read_switched_off_it_expands_to_null(
        shop: Shop) -> None:
    shop.invoice(number="A-1", vendor_uid=shop.vendors["acme"])
    lister = member(shop, ["invoices:read_list", "invoices:read", "vendors:read_list"])
    items = expect(lister.get(shop.world.rows("invoices"), params={"expand": "vendor"}),
                   200)["items"]
    assert [r["expand"] for r in items] == [{"vendor": None}]
    items = expect(shop.clerk.get(shop.world.rows("invoices"), params={"expand": "vendor"}),
                   200)["items"]
    assert items[0]["expand"]["vendor"]["name"] == "acme"
    expect(shop.world.admin.patch(f"{shop.world.base}/tables/vendors",
                                  json={"operations": {"read": False}}), 200)
    items = expect(shop.clerk.get(shop.world.rows("invoices"), params={"expand": "vendor"}),
                   200)["items"]
    assert [r["expand"] for r in items] == [{"vendor": None}]


def test_a_reference_redacted_for_the_member_expands_to_null(shop: Shop) -> None:
    shop.invoice(number="A-1", vendor_uid=shop.vendors["acme"])
    reader = member(shop, ["invoices:read_list", "invoices:read", "vendors:read"],
                    redact={"invoices": ["vendor"]})
    items = expect(reader.get(shop.world.rows("invoices"), params={"expand": "vendor"}),
                   200)["items"]
    assert items[0]["vendor_uid"] == "[redacted]" and items[0]["expand"] == {"vendor": None}


def test_a_reference_can_never_point_into_another_org_so_no_expansion_crosses_orgs(
        shop: Shop) -> None:
    south = shop.world.caller(shop.world.org("South"), ["clerk"])
    expect(south.post(shop.world.rows("invoices"), json={"vendor_uid": shop.vendors["acme"]}),
           409, "CONFLICT")
    theirs = expect(south.post(shop.world.rows("vendors"), json={"name": "acme"}), 201)["uid"]
    row = shop.invoice(south, vendor_uid=theirs)
    got = expect(south.get(f"{shop.world.rows('invoices')}/{row['uid']}",
                           params={"expand": "vendor"}), 200)
    assert got["expand"]["vendor"]["uid"] == theirs
    assert expect(shop.clerk.get(shop.world.rows("invoices"), params={"expand": "vendor"}),
                  200)["items"] == []


def test_two_levels_nest_and_read_write_responses_expand_too(shop: Shop) -> None:
    path = shop.world.rows("invoices")
    created = expect(shop.clerk.post(path, params={"expand": "vendor.country"},
                                     json={"vendor_uid": shop.vendors["zen"]}), 201)
    vendor = created["expand"]["vendor"]
    assert vendor["name"] == "zen"
    assert vendor["expand"]["country"]["name"] == "Japan"
    updated = expect(shop.clerk.patch(f"{path}/{created['uid']}", params={"expand": "vendor"},
                                      json={"vendor_uid": shop.vendors["acme"]}), 200)
    assert updated["expand"]["vendor"]["name"] == "acme"
    assert "expand" not in updated["expand"]["vendor"]
    read = expect(shop.clerk.get(f"{path}/{created['uid']}",
                                 params={"expand": "vendor,vendor.country"}), 200)
    assert read["expand"]["vendor"]["expand"]["country"]["name"] == "France"
    cleared = expect(shop.clerk.patch(f"{path}/{created['uid']}",
                                      params={"expand": "vendor.country"},
                                      json={"vendor_uid": None}), 200)
    assert cleared["expand"] == {"vendor": None}


def test_the_second_level_is_judged_by_its_own_table(shop: Shop) -> None:
    shop.invoice(number="A-1", vendor_uid=shop.vendors["acme"])
    reader = member(shop, ["invoices:read_list", "invoices:read", "vendors:read"])
    items = expect(reader.get(shop.world.rows("invoices"),
                              params={"expand": "vendor.country"}), 200)["items"]
    assert items[0]["expand"]["vendor"]["name"] == "acme"
    assert items[0]["expand"]["vendor"]["expand"] == {"country": None}


@pytest.mark.parametrize("expand", ["number", "nope", "vendor.name", "vendor.country.name",
                                    "vendor..country", "", "vendor_uid"])
def test_expanding_what_is_not_a_reference_is_400_and_writes_nothing(shop: Shop,
                                                                      expand: str) -> None:
    path = shop.world.rows("invoices")
    expect(shop.clerk.get(path, params={"expand": expand}), 400, "BAD_REQUEST")
    expect(shop.clerk.post(path, params={"expand": expand}, json={"number": "X"}), 400,
           "BAD_REQUEST")
    assert expect(shop.clerk.get(path), 200)["items"] == []


def test_expanding_costs_one_statement_per_path_whatever_the_number_of_rows(shop: Shop) -> None:
    for i in range(30):
        shop.invoice(number=f"A-{i}", vendor_uid=shop.vendors["acme" if i % 2 else "zen"])
    path = shop.world.rows("invoices")
    plain = shop.clerk.get(path, params={"limit": "30"})
    one = shop.clerk.get(path, params={"limit": "30", "expand": "vendor"})
    two = shop.clerk.get(path, params={"limit": "30", "expand": "vendor.country"})
    assert int(one.headers[HEADER]) == int(plain.headers[HEADER]) + 1
    assert int(two.headers[HEADER]) == int(plain.headers[HEADER]) + 2
    assert len({r["expand"]["vendor"]["uid"] for r in two.json()["items"]}) == 2


# Expand on subscribe -------------------------------------------------------------------------

def subscribe(shop: Shop, caller: Caller, expand: str,
              last_event_id: int | None = None) -> SSEClient:
    stream = SSEClient(shop.world.server.url, f"{shop.world.rows('invoices')}/subscribe",
                       caller.token, params={"expand": expand}, last_event_id=last_event_id)
    assert stream.status_code == 200, stream.body
    stream.wait_connected()
    return stream


def test_a_subscriber_gets_each_events_references_expanded_as_it_may_read_them(
        shop: Shop) -> None:
    reader = member(shop, ["invoices:read_list", "invoices:read", "vendors:read",
                           "countries:read"],
                    row_policies={"vendors": {"status": {"eq": "active"}}},
                    redact={"vendors": ["iban"]})
    with subscribe(shop, reader, "vendor,vendor.country") as stream:
        shown = shop.invoice(number="A-1", vendor_uid=shop.vendors["acme"])
        hidden = shop.invoice(number="A-2", vendor_uid=shop.vendors["hidden"])
        empty = shop.invoice(number="A-3")
        row = stream.wait_for_change(shown["uid"], "insert").data["row"]
        vendor = row["expand"]["vendor"]
        assert (vendor["uid"], vendor["name"]) == (shop.vendors["acme"], "acme")
        assert vendor["iban"] == "[redacted]"  # the vendors table's redaction, for this member
        assert vendor["expand"]["country"]["name"] == "France"
        row = stream.wait_for_change(hidden["uid"], "insert").data["row"]
        assert row["expand"] == {"vendor": None}  # its policy hides the vendor
        assert row["vendor_uid"] == shop.vendors["hidden"]
        assert stream.wait_for_change(empty["uid"], "insert").data["row"]["expand"] == {
            "vendor": None}
        # An update is re-read, expansion and all, at delivery.
        expect(shop.clerk.patch(f"{shop.world.rows('invoices')}/{empty['uid']}",
                                json={"vendor_uid": shop.vendors["zen"]}), 200)
        row = stream.wait_for_change(empty["uid"], "update").data["row"]
        assert row["expand"]["vendor"]["expand"]["country"]["name"] == "Japan"
        first = stream.wait_for_change(shown["uid"], "insert").pos
    # A resumed stream replays with the same expansion.
    with subscribe(shop, reader, "vendor", last_event_id=first - 1) as stream:
        row = stream.wait_for_change(shown["uid"], "insert").data["row"]
        assert row["expand"]["vendor"]["name"] == "acme" and "expand" not in row["expand"][
            "vendor"]


def test_members_sharing_roles_see_expansions_judged_by_their_own_vendor_policy(
        shop: Shop) -> None:
    """The vendors' policy names the member: two members of one org with the same role read
    different vendors, so their streams must not share one judged expansion."""
    policy = {"vendors": {"iban": {"eq": {"$principal": "uid"}}}}
    shop.world.role("owner", ["invoices:read_list", "invoices:read", "vendors:read"],
                    row_policies=policy)
    ann, bob = (shop.world.caller(shop.org, ["owner"]) for _ in range(2))
    owned = expect(shop.clerk.post(shop.world.rows("vendors"), json={
        "name": "ann's", "iban": ann.user_uid}), 201)["uid"]
    with subscribe(shop, ann, "vendor") as ann_stream, \
            subscribe(shop, bob, "vendor") as bob_stream:
        row = shop.invoice(number="A-1", vendor_uid=owned)
        seen = ann_stream.wait_for_change(row["uid"], "insert").data["row"]
        assert seen["expand"]["vendor"]["name"] == "ann's"
        seen = bob_stream.wait_for_change(row["uid"], "insert").data["row"]
        assert seen["expand"] == {"vendor": None}


@pytest.mark.parametrize("expand", ["number", "nope", "vendor.name", "vendor..country", ""])
def test_subscribing_with_an_expand_that_is_not_a_reference_is_400_like_a_list(
        shop: Shop, expand: str) -> None:
    stream = SSEClient(shop.world.server.url, f"{shop.world.rows('invoices')}/subscribe",
                       shop.clerk.token, params={"expand": expand})
    with stream:
        assert stream.status_code == 400, stream.body
        assert json.loads(stream.body)["error"]["code"] == "BAD_REQUEST"
    # The gate answers first, as on a list.
    outsider = member(shop, ["vendors:read"])
    with SSEClient(shop.world.server.url, f"{shop.world.rows('invoices')}/subscribe",
                   outsider.token, params={"expand": expand}) as refused:
        assert refused.status_code == 403


# Count --------------------------------------------------------------------------------------

def test_count_exact_is_the_number_the_member_may_see_matching_the_filter(shop: Shop) -> None:
    for i in range(7):
        shop.invoice(number=f"A-{i}", amount=str(i))
    south = shop.world.caller(shop.world.org("South"), ["clerk"])
    shop.invoice(south, number="S-1", amount="1")
    reader = member(shop, ["invoices:read_list", "invoices:read"],
                    row_policies={"invoices": {"amount": {"lt": "5"}}})
    path = shop.world.rows("invoices")
    got = expect(reader.get(path, params={"count": "exact", "limit": "2"}), 200)
    assert got["total"] == 5 and len(got["items"]) == 2
    page2 = expect(reader.get(path, params={"count": "exact", "limit": "2",
                                            "after": got["next"]}), 200)
    assert page2["total"] == 5
    filtered = expect(reader.get(path, params={"count": "exact", "amount[gte]": "3"}), 200)
    assert filtered["total"] == 2
    assert "total" not in expect(reader.get(path), 200)


def test_count_takes_exact_only_for_members_and_estimate_for_the_operator(shop: Shop) -> None:
    path = shop.world.rows("invoices")
    expect(shop.clerk.get(path, params={"count": "all"}), 400, "BAD_REQUEST")
    expect(shop.clerk.get(path, params={"count": "estimate"}), 400, "BAD_REQUEST")
    for i in range(3):
        shop.invoice(number=f"A-{i}")
    rows = f"{shop.world.base}/tables/invoices/rows"
    assert expect(shop.world.admin.get(rows, params={"count": "exact", "limit": "1"}),
                  200)["total"] == 3
    estimate = expect(shop.world.admin.get(rows, params={"count": "estimate"}), 200)
    assert estimate["estimated"] is True and isinstance(estimate["total"], int)
    assert estimate["total"] >= 0
    expect(shop.world.admin.get(rows, params={"count": "maybe"}), 400, "BAD_REQUEST")
