"""Changes to roles, members and tables made through one server process are in force for the
very next request on another process of the same database (no cache may serve stale rules).

Two processes share the database and the data directory (hence the JWT secret). Each test
first warms the observing process with the old rules, then changes them through the other
process, then checks the observer's very next request.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server


@pytest.fixture(scope="module")
def replica(database_url: str, data_dir: Path) -> Iterator[ServerProcess]:
    proc = start_server(database_url, data_dir)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def replica_http(replica: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=replica.url, timeout=30) as client:
        yield client


@dataclass
class Sides:
    """`admin` changes rules through one process; `observe` re-sends a caller to the other."""

    admin: Caller
    other: httpx.Client

    def observe(self, caller: Caller) -> Caller:
        return Caller(self.other, caller.token, caller.refresh_token)


@pytest.fixture(params=["change on A, observe on B", "change on B, observe on A"])
def sides(request: pytest.FixtureRequest, server: ServerProcess, http: httpx.Client,
          replica_http: httpx.Client) -> Sides:
    changer, observer = (http, replica_http) if request.param.startswith("change on A") else (
        replica_http, http)
    return Sides(Caller(changer, server.admin_token), observer)


@pytest.fixture
def invoices(world: AppWorld) -> tuple[AppWorld, str, Caller, str]:
    """An `invoices` table, a clerk with every permission, and one row written by the clerk."""
    world.table("invoices", [{"name": "number", "type": "text"},
                             {"name": "status", "type": "text"},
                             {"name": "amount", "type": "numeric"}])
    org = world.org("North")
    world.role("clerk", ["invoices:*"])
    clerk = world.caller(org, ["clerk"])
    row = expect(clerk.post(world.rows("invoices"), json={
        "number": "A-1", "status": "draft", "amount": "10.00"}), 201)
    return world, org, clerk, row["uid"]


def warm(caller: Caller, world: AppWorld, uid: str) -> dict[str, object]:
    """A few requests that load (and cache) the current rules on the caller's process."""
    for _ in range(3):
        expect(caller.get(world.rows("invoices")), 200)
    row: dict[str, object] = expect(caller.get(f"{world.rows('invoices')}/{uid}"), 200)
    return row


def test_a_revoked_permission_is_refused_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, _, clerk, uid = invoices
    there = sides.observe(clerk)
    warm(there, world, uid)
    expect(sides.admin.put(f"{world.base}/roles/clerk",
                           json={"permissions": ["invoices:create"]}), 200)
    expect(there.get(world.rows("invoices")), 403, "FORBIDDEN")
    expect(there.get(f"{world.rows('invoices')}/{uid}"), 403, "FORBIDDEN")


def test_a_granted_permission_is_honoured_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, org, _, _ = invoices
    world.role("auditor", [])
    auditor = sides.observe(world.caller(org, ["auditor"]))
    expect(auditor.get(world.rows("invoices")), 403, "FORBIDDEN")
    expect(sides.admin.put(f"{world.base}/roles/auditor",
                           json={"permissions": ["invoices:read_list"]}), 200)
    assert len(expect(auditor.get(world.rows("invoices")), 200)["items"]) == 1


def test_a_removed_membership_is_unauthenticated_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, org, clerk, uid = invoices
    there = sides.observe(clerk)
    warm(there, world, uid)
    expect(sides.admin.delete(f"{world.base}/orgs/{org}/members/{clerk.user_uid}"), 204)
    expect(there.get(world.rows("invoices")), 401, "UNAUTHENTICATED")
    expect(there.get(f"{world.rows('invoices')}/{uid}"), 401, "UNAUTHENTICATED")


def test_a_membership_whose_roles_change_takes_the_new_roles_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, org, clerk, uid = invoices
    world.role("nobody", [])
    there = sides.observe(clerk)
    warm(there, world, uid)
    expect(sides.admin.put(f"{world.base}/orgs/{org}/members/{clerk.user_uid}",
                           json={"roles": ["nobody"]}), 200)
    expect(there.get(world.rows("invoices")), 403, "FORBIDDEN")


def test_a_deleted_role_grants_nothing_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, _, clerk, uid = invoices
    there = sides.observe(clerk)
    warm(there, world, uid)
    expect(sides.admin.delete(f"{world.base}/roles/clerk"), 204)
    expect(there.get(world.rows("invoices")), 403, "FORBIDDEN")


def test_an_added_redaction_is_redacted_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, _, clerk, uid = invoices
    there = sides.observe(clerk)
    assert warm(there, world, uid)["amount"] == "10.00"
    expect(sides.admin.put(f"{world.base}/roles/clerk", json={
        "permissions": ["invoices:*"], "redact": {"invoices": ["amount"]}}), 200)
    assert expect(there.get(f"{world.rows('invoices')}/{uid}"), 200)["amount"] == "[redacted]"
    assert expect(there.get(world.rows("invoices")), 200)["items"][0]["amount"] == "[redacted]"
    # and the redacted column is no longer a filter or an order for this caller
    expect(there.get(world.rows("invoices"), params={"amount": "10.00"}), 400, "BAD_REQUEST")
    expect(there.get(world.rows("invoices"), params={"order": "amount"}), 400, "BAD_REQUEST")


def test_an_added_row_policy_hides_rows_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, _, clerk, uid = invoices
    there = sides.observe(clerk)
    warm(there, world, uid)
    expect(sides.admin.put(f"{world.base}/roles/clerk", json={
        "permissions": ["invoices:*"], "rowPolicies": {"invoices": {"status": {"ne": "draft"}}}}),
        200)
    assert expect(there.get(world.rows("invoices")), 200)["items"] == []
    expect(there.get(f"{world.rows('invoices')}/{uid}"), 404, "NOT_FOUND")
    expect(there.patch(f"{world.rows('invoices')}/{uid}", json={"number": "A-2"}), 404,
           "NOT_FOUND")


def test_a_dropped_column_is_gone_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, _, clerk, uid = invoices
    there = sides.observe(clerk)
    assert "amount" in warm(there, world, uid)
    expect(sides.admin.patch(f"{world.base}/tables/invoices", json={"dropColumns": ["amount"]}),
           200)
    row = expect(there.get(f"{world.rows('invoices')}/{uid}"), 200)
    assert "amount" not in row and row["number"] == "A-1"
    assert "amount" not in expect(there.get(world.rows("invoices")), 200)["items"][0]
    expect(there.post(world.rows("invoices"), json={"amount": "1"}), 422, "VALIDATION_FAILED")
    expect(there.get(world.rows("invoices"), params={"amount": "1"}), 400, "BAD_REQUEST")


def test_an_added_column_is_usable_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, _, clerk, uid = invoices
    there = sides.observe(clerk)
    assert "due" not in warm(there, world, uid)
    expect(sides.admin.patch(f"{world.base}/tables/invoices", json={
        "addColumns": [{"name": "due", "type": "date"}]}), 200)
    row = expect(there.patch(f"{world.rows('invoices')}/{uid}", json={"due": "2030-01-31"}), 200)
    assert row["due"] == "2030-01-31"


def test_a_switched_off_operation_is_locked_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, _, clerk, uid = invoices
    there = sides.observe(clerk)
    warm(there, world, uid)
    expect(sides.admin.patch(f"{world.base}/tables/invoices",
                             json={"operations": {"list": False, "create": False}}), 200)
    expect(there.get(world.rows("invoices")), 403, "TABLE_LOCKED")
    expect(there.post(world.rows("invoices"), json={"number": "A-2"}), 403, "TABLE_LOCKED")
    expect(there.get(f"{world.rows('invoices')}/{uid}"), 200)


def test_a_deleted_table_is_not_found_on_the_other_process(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, _, clerk, uid = invoices
    there = sides.observe(clerk)
    warm(there, world, uid)
    expect(sides.admin.delete(f"{world.base}/tables/invoices"), 204)
    expect(there.get(world.rows("invoices")), 404, "NOT_FOUND")
    expect(there.get(f"{world.rows('invoices')}/{uid}"), 404, "NOT_FOUND")


def test_a_refresh_token_issued_by_one_process_rotates_on_the_other(
        invoices: tuple[AppWorld, str, Caller, str], sides: Sides) -> None:
    world, _, clerk, _ = invoices
    url = f"/{world.name}/auth/refresh"
    pair = expect(sides.other.post(url, json={"refresh_token": clerk.refresh_token}), 200)
    # the spent token is refused by the first process too, and its reuse revokes the family
    expect(sides.admin.client.post(url, json={"refresh_token": clerk.refresh_token}), 401,
           "UNAUTHENTICATED")
    expect(sides.other.post(url, json={"refresh_token": pair["refresh_token"]}), 401,
           "UNAUTHENTICATED")
