"""The request path's cost, counted: a read or a list is one statement, a create is one statement
(it commits by itself), and the authentication facts travel inside that statement, so a change
committed between two requests still applies to the second, on this process or another.

The server runs with AUTHORIC_TEST_COUNT_ROUND_TRIPS=1, which makes every response say how
many statements its request sent to PostgreSQL (`X-Authoric-Round-Trips`). The count is a
property of the design, not a timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server

HEADER = "x-authoric-round-trips"


@pytest.fixture(scope="module")
def counting(database_url: str, data_dir: Path) -> Iterator[ServerProcess]:
    proc = start_server(database_url, data_dir, AUTHORIC_TEST_COUNT_ROUND_TRIPS="1")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def counting_http(counting: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=counting.url, timeout=30) as client:
        yield client


@pytest.fixture
def shop(counting: ServerProcess, counting_http: httpx.Client) -> tuple[AppWorld, str, Caller]:
    """Invoices with a row policy and a redacted column, a clerk bound by both, two rows."""
    world = AppWorld.create(counting, counting_http)
    world.table("invoices", [{"name": "number", "type": "text", "required": True},
                             {"name": "status", "type": "text", "default": "received"},
                             {"name": "amount", "type": "numeric"}])
    org = world.org("North")
    world.role("clerk", ["invoices:*"], row_policies={"invoices": {"status": {"ne": "draft"}}},
               redact={"invoices": ["amount"]})
    clerk = world.caller(org, ["clerk"])
    for number in ("A-1", "A-2"):
        expect(clerk.post(world.rows("invoices"), json={"number": number, "amount": "1.00"}), 201)
    return world, org, clerk


def trips(response: httpx.Response) -> int:
    return int(response.headers[HEADER])


def test_a_member_reading_one_row_costs_one_statement(shop: tuple[AppWorld, str, Caller]) -> None:
    world, _, clerk = shop
    items = expect(clerk.get(world.rows("invoices")), 200)["items"]
    response = clerk.get(f"{world.rows('invoices')}/{items[0]['uid']}")
    assert expect(response, 200)["amount"] == "[redacted]"
    assert trips(response) == 1


def test_a_member_listing_a_filtered_page_costs_one_statement(
        shop: tuple[AppWorld, str, Caller]) -> None:
    world, _, clerk = shop
    expect(clerk.get(world.rows("invoices")), 200)
    response = clerk.get(world.rows("invoices"), params={
        "number[in]": "A-1,A-2", "order": "-createdAt", "limit": "1"})
    body = expect(response, 200)
    assert [r["number"] for r in body["items"]] == ["A-2"] and body["next"]
    assert trips(response) == 1
    following = clerk.get(world.rows("invoices"), params={
        "number[in]": "A-1,A-2", "order": "-createdAt", "limit": "1", "after": body["next"]})
    assert [r["number"] for r in expect(following, 200)["items"]] == ["A-1"]
    assert trips(following) == 1


def test_a_member_creating_a_row_costs_one_statement_that_commits_itself(
        shop: tuple[AppWorld, str, Caller]) -> None:
    world, _, clerk = shop
    response = clerk.post(world.rows("invoices"), json={"number": "A-3", "amount": "2.50"})
    row = expect(response, 201)
    assert row["status"] == "received" and row["amount"] == "[redacted]"
    assert trips(response) <= 2
    assert trips(response) == 1  # autocommit: no BEGIN, no COMMIT of its own
    assert expect(clerk.get(f"{world.rows('invoices')}/{row['uid']}"), 200)["number"] == "A-3"


def test_a_create_the_row_policy_refuses_writes_nothing_in_one_statement(
        shop: tuple[AppWorld, str, Caller]) -> None:
    world, _, clerk = shop
    response = clerk.post(world.rows("invoices"), json={"number": "D-1", "status": "draft"})
    expect(response, 403, "FORBIDDEN")
    assert trips(response) == 1
    world.role("boss", ["invoices:*"])
    boss = world.caller(world.orgs["North"], ["boss"])
    numbers = [r["number"] for r in expect(boss.get(world.rows("invoices")), 200)["items"]]
    assert "D-1" not in numbers


def test_a_role_change_between_two_reads_applies_to_the_second_and_the_third_costs_one_again(
        shop: tuple[AppWorld, str, Caller]) -> None:
    world, _, clerk = shop
    expect(clerk.get(world.rows("invoices")), 200)
    world.role("clerk", ["invoices:create"])
    expect(clerk.get(world.rows("invoices")), 403, "FORBIDDEN")
    world.role("clerk", ["invoices:*"], row_policies={"invoices": {"number": {"eq": "A-1"}}})
    # refused by its guard, planned again from the facts the guard brought back
    first = clerk.get(world.rows("invoices"))
    assert [r["number"] for r in expect(first, 200)["items"]] == ["A-1"]
    assert trips(first) > 1
    second = clerk.get(world.rows("invoices"))
    assert [r["number"] for r in expect(second, 200)["items"]] == ["A-1"]
    assert trips(second) == 1


def test_a_membership_removed_through_another_process_ends_access_on_the_next_request(
        shop: tuple[AppWorld, str, Caller], server: ServerProcess, http: httpx.Client) -> None:
    world, org, clerk = shop
    expect(clerk.get(world.rows("invoices")), 200)  # this process now caches the clerk's facts
    other = Caller(http, server.admin_token)
    expect(other.delete(f"{world.base}/orgs/{org}/members/{clerk.user_uid}"), 204)
    expect(clerk.get(world.rows("invoices")), 401, "UNAUTHENTICATED")
    expect(clerk.post(world.rows("invoices"), json={"number": "Z-1"}), 401, "UNAUTHENTICATED")


def test_a_role_change_made_through_another_process_applies_to_the_next_create(
        shop: tuple[AppWorld, str, Caller], server: ServerProcess, http: httpx.Client) -> None:
    world, _, clerk = shop
    expect(clerk.post(world.rows("invoices"), json={"number": "B-1"}), 201)
    other = Caller(http, server.admin_token)
    expect(other.put(f"{world.base}/roles/clerk", json={"permissions": ["invoices:read"]}), 200)
    expect(clerk.post(world.rows("invoices"), json={"number": "B-2"}), 403, "FORBIDDEN")
    expect(other.put(f"{world.base}/roles/clerk", json={"permissions": ["invoices:*"]}), 200)
    row = expect(clerk.post(world.rows("invoices"), json={"number": "B-3"}), 201)
    assert row["amount"] is None  # the redaction went with the old role


def test_a_column_added_through_another_process_is_writable_on_the_next_create(
        shop: tuple[AppWorld, str, Caller], server: ServerProcess, http: httpx.Client) -> None:
    world, _, clerk = shop
    expect(clerk.post(world.rows("invoices"), json={"number": "C-1"}), 201)
    other = Caller(http, server.admin_token)
    expect(other.patch(f"{world.base}/tables/invoices",
                       json={"addColumns": [{"name": "note", "type": "text"}]}), 200)
    row = expect(clerk.post(world.rows("invoices"), json={"number": "C-2", "note": "new"}), 201)
    assert row["note"] == "new"


def test_a_member_updating_and_deleting_a_row_costs_one_statement_each(
        shop: tuple[AppWorld, str, Caller]) -> None:
    world, _, clerk = shop
    row = expect(clerk.post(world.rows("invoices"), json={"number": "U-1"}), 201)
    url = f"{world.rows('invoices')}/{row['uid']}"
    updated = clerk.patch(url, json={"status": "paid"})
    assert expect(updated, 200)["status"] == "paid"
    assert trips(updated) == 1
    deleted = clerk.delete(url)
    expect(deleted, 204)
    assert trips(deleted) == 1
    expect(clerk.get(url), 404, "NOT_FOUND")


def test_an_update_the_row_policy_refuses_changes_nothing(
        shop: tuple[AppWorld, str, Caller]) -> None:
    world, _, clerk = shop
    row = expect(clerk.post(world.rows("invoices"), json={"number": "U-2"}), 201)
    url = f"{world.rows('invoices')}/{row['uid']}"
    expect(clerk.patch(url, json={"status": "draft"}), 403, "FORBIDDEN")
    assert expect(clerk.get(url), 200)["status"] == "received"
    expect(clerk.patch(f"{world.rows('invoices')}/{world.orgs['North']}", json={"status": "x"}),
           404, "NOT_FOUND")


def test_a_member_whose_facts_were_cached_before_an_unrelated_change_costs_one_statement_again(
        shop: tuple[AppWorld, str, Caller]) -> None:
    world, org, clerk = shop
    expect(clerk.get(world.rows("invoices")), 200)  # facts cached at this version
    world.caller(org, ["clerk"])  # another member: the app's version moves
    other = world.caller(org, ["clerk"])
    expect(other.get(world.rows("invoices")), 200)  # this process loads the new snapshot
    expect(clerk.get(world.rows("invoices")), 200)  # the clerk's guard sees the new version
    for _ in range(3):
        assert trips(clerk.get(world.rows("invoices"))) == 1


def a_row_the_clerk_has_written(shop: tuple[AppWorld, str, Caller]) -> tuple[str, dict[str, Any]]:
    """The url and the first row of the clerk's page, after one update by the clerk: this
    process now holds the clerk's facts and has planned its writes."""
    world, _, clerk = shop
    first = expect(clerk.get(world.rows("invoices")), 200)["items"][0]
    url = f"{world.rows('invoices')}/{first['uid']}"
    expect(clerk.patch(url, json={"amount": "3.00"}), 200)
    return url, first


def test_a_role_change_made_through_another_process_applies_to_the_next_update_and_delete(
        shop: tuple[AppWorld, str, Caller], server: ServerProcess, http: httpx.Client) -> None:
    world, _, clerk = shop
    url, first = a_row_the_clerk_has_written(shop)
    other = Caller(http, server.admin_token)
    expect(other.put(f"{world.base}/roles/clerk", json={"permissions": ["invoices:read"]}), 200)
    expect(clerk.patch(url, json={"number": "X-1"}), 403, "FORBIDDEN")
    expect(clerk.delete(url), 403, "FORBIDDEN")
    assert expect(clerk.get(url), 200)["number"] == first["number"]


def test_a_membership_removed_through_another_process_ends_updates_and_deletes_at_once(
        shop: tuple[AppWorld, str, Caller], server: ServerProcess, http: httpx.Client) -> None:
    world, org, clerk = shop
    url, first = a_row_the_clerk_has_written(shop)
    other = Caller(http, server.admin_token)
    expect(other.delete(f"{world.base}/orgs/{org}/members/{clerk.user_uid}"), 204)
    expect(clerk.patch(url, json={"number": "X-1"}), 401, "UNAUTHENTICATED")
    expect(clerk.delete(url), 401, "UNAUTHENTICATED")
    world.role("boss", ["invoices:*"])
    boss = world.caller(org, ["boss"])
    kept = expect(boss.get(url), 200)
    assert kept["number"] == first["number"] and kept["amount"] == "3.00"


def test_a_made_up_api_key_costs_one_lookup_at_most_and_a_misshapen_one_none(
        shop: tuple[AppWorld, str, Caller]) -> None:
    """A client hammering with a key that does not exist: the first try looks it up, the
    same key again within seconds is refused from memory; a bearer that starts `ak_` but is
    not shaped as the server's keys is refused without a lookup. A real key still works."""
    world, org, clerk = shop
    made_up = "ak_" + "A" * 43
    first = clerk.client.get(world.rows("invoices"), headers={"Authorization": f"Bearer {made_up}"})
    expect(first, 401, "UNAUTHENTICATED")
    assert trips(first) >= 1
    for bearer in (made_up, "ak_short", "ak_" + "A" * 42 + "!"):
        again = clerk.client.get(world.rows("invoices"),
                                 headers={"Authorization": f"Bearer {bearer}"})
        expect(again, 401, "UNAUTHENTICATED")
        assert trips(again) == 0, bearer
    key = expect(world.admin.post(f"{world.base}/orgs/{org}/keys",
                                  json={"name": "job", "roles": ["clerk"]}), 201)["key"]
    expect(clerk.client.get(world.rows("invoices"), headers={"Authorization": f"Bearer {key}"}),
           200)
