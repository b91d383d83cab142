"""Platform administration of organizations, users, memberships and roles (contract section 2).

Each change is checked by what the affected app users notice on their very next request.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    """Whatever a test does, the server never logs a traceback (an unexpected error)."""
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
def notes(world: AppWorld) -> AppWorld:
    """An app with a `notes` table and two roles: `reader` (list, read) and `writer` (all)."""
    world.table("notes", [{"name": "body", "type": "text"}, {"name": "owner", "type": "text"},
                          {"name": "price", "type": "numeric"}])
    world.role("reader", ["notes:read_list", "notes:read"])
    world.role("writer", ["notes:*"])
    return world


def _login(world: AppWorld, email: str, password: str, org: str | None = None) -> Any:
    body = {"email": email, "password": password, **({"org": org} if org else {})}
    return world.admin.client.post(f"/{world.name}/auth/token", json=body)


# Organizations ---------------------------------------------------------------------------

def test_admin_creates_lists_and_deletes_orgs(world: AppWorld) -> None:
    created = expect(world.admin.post(f"{world.base}/orgs", json={"name": "Northwind"}), 201)
    assert set(created) == {"uid", "name"} and created["name"] == "Northwind"
    uuid.UUID(created["uid"])
    other = world.org("Contoso")
    listed = expect(world.admin.get(f"{world.base}/orgs"), 200)["items"]
    assert {o["uid"]: o["name"] for o in listed} == {created["uid"]: "Northwind",
                                                     other: "Contoso"}
    resp = world.admin.delete(f"{world.base}/orgs/{created['uid']}")
    assert resp.status_code == 204 and resp.content == b""
    listed = expect(world.admin.get(f"{world.base}/orgs"), 200)["items"]
    assert [o["uid"] for o in listed] == [other]


def test_admin_gets_404_deleting_an_org_that_does_not_exist(world: AppWorld) -> None:
    expect(world.admin.delete(f"{world.base}/orgs/{uuid.uuid4()}"), 404, "NOT_FOUND")
    expect(world.admin.delete(f"{world.base}/orgs/not-a-uid"), 404, "NOT_FOUND")


def test_admin_gets_409_creating_an_org_whose_name_is_taken_in_the_app(world: AppWorld) -> None:
    world.org("Northwind")
    expect(world.admin.post(f"{world.base}/orgs", json={"name": "Northwind"}), 409, "CONFLICT")
    assert len(expect(world.admin.get(f"{world.base}/orgs"), 200)["items"]) == 1


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "   "}, {"name": 5}, ["Northwind"]])
def test_admin_gets_422_for_an_org_without_a_name(world: AppWorld, body: Any) -> None:
    expect(world.admin.post(f"{world.base}/orgs", json=body), 422, "VALIDATION_FAILED")
    assert expect(world.admin.get(f"{world.base}/orgs"), 200)["items"] == []


def test_orgs_of_one_app_are_not_visible_from_another(world: AppWorld, server: ServerProcess) -> None:
    other = AppWorld.create(server, world.admin.client)
    org = world.org("Northwind")
    other.org("Northwind")  # the same name is fine in another app
    assert expect(other.admin.get(f"{other.base}/orgs"), 200)["items"][0]["uid"] != org
    expect(other.admin.delete(f"{other.base}/orgs/{org}"), 404, "NOT_FOUND")
    assert [o["uid"] for o in expect(world.admin.get(f"{world.base}/orgs"), 200)["items"]] == [org]


def test_member_of_a_deleted_org_gets_401_on_the_next_request(notes: AppWorld) -> None:
    org = notes.org("Northwind")
    member = notes.caller(org, ["writer"])
    expect(member.get(notes.rows("notes")), 200)
    assert notes.admin.delete(f"{notes.base}/orgs/{org}").status_code == 204
    assert expect(notes.admin.get(f"{notes.base}/orgs"), 200)["items"] == []
    expect(member.get(notes.rows("notes")), 401, "UNAUTHENTICATED")
    expect(notes.admin.client.post(f"/{notes.name}/auth/refresh",
                                   json={"refresh_token": member.refresh_token}),
           401, "UNAUTHENTICATED")


# Users -----------------------------------------------------------------------------------

def test_admin_creates_a_user_and_never_sees_the_password_or_its_hash(world: AppWorld) -> None:
    password = "tr0ub4dor&3-secret"
    created = expect(world.admin.post(f"{world.base}/users", json={
        "email": "Ada@Example.com", "password": password}), 201)
    assert set(created) == {"uid", "email"}
    assert created["email"].lower() == "ada@example.com"
    listing = world.admin.get(f"{world.base}/users")
    assert [u["uid"] for u in expect(listing, 200)["items"]] == [created["uid"]]
    assert all(set(u) == {"uid", "email", "emailVerified"} for u in listing.json()["items"])
    for text in (listing.text, world.admin.get(world.base).text):
        assert password not in text and "argon2" not in text


def test_admin_gets_409_creating_a_user_whose_email_is_taken(world: AppWorld) -> None:
    world.user("ada@example.com")
    expect(world.admin.post(f"{world.base}/users", json={
        "email": "ada@example.com", "password": "another password"}), 409, "CONFLICT")
    expect(world.admin.post(f"{world.base}/users", json={
        "email": "ADA@example.com", "password": "another password"}), 409, "CONFLICT")
    assert len(expect(world.admin.get(f"{world.base}/users"), 200)["items"]) == 1


@pytest.mark.parametrize("body", [
    {"email": "ada@example.com"},
    {"password": "long enough"},
    {"email": "not an email", "password": "long enough"},
    {"email": "", "password": "long enough"},
    {"email": "ada@example.com", "password": 12345678},
    {"email": "ada@example.com", "password": ""},
])
def test_admin_gets_422_for_a_user_without_a_usable_email_or_password(
        world: AppWorld, body: dict[str, Any]) -> None:
    expect(world.admin.post(f"{world.base}/users", json=body), 422, "VALIDATION_FAILED")
    assert expect(world.admin.get(f"{world.base}/users"), 200)["items"] == []


def test_deleted_user_gets_401_on_the_next_request_and_cannot_log_in(notes: AppWorld) -> None:
    org = notes.org("Northwind")
    user = notes.user()
    notes.member(org, user["uid"], ["writer"])
    member = notes.login(user, org)
    expect(member.get(notes.rows("notes")), 200)
    assert notes.admin.delete(f"{notes.base}/users/{user['uid']}").status_code == 204
    assert expect(notes.admin.get(f"{notes.base}/users"), 200)["items"] == []
    expect(member.get(notes.rows("notes")), 401, "UNAUTHENTICATED")
    expect(_login(notes, user["email"], user["password"], org), 401, "UNAUTHENTICATED")
    expect(notes.admin.delete(f"{notes.base}/users/{user['uid']}"), 404, "NOT_FOUND")


# Members ---------------------------------------------------------------------------------

def test_admin_puts_a_membership_and_gets_org_user_and_roles_back(notes: AppWorld) -> None:
    org = notes.org("Northwind")
    user = notes.user()
    got = expect(notes.admin.put(f"{notes.base}/orgs/{org}/members/{user['uid']}",
                                 json={"roles": ["reader"]}), 200)
    assert got == {"org": org, "user": user["uid"], "roles": ["reader"]}
    again = expect(notes.admin.put(f"{notes.base}/orgs/{org}/members/{user['uid']}",
                                   json={"roles": ["writer", "reader"]}), 200)
    assert sorted(again["roles"]) == ["reader", "writer"]
    listed = expect(notes.admin.get(f"{notes.base}/orgs/{org}/members"), 200)["items"]
    assert [(m["user"], sorted(m["roles"])) for m in listed] == [(user["uid"],
                                                                  ["reader", "writer"])]
    # The roles are the member's: the writer role lets them write in that org.
    member = notes.login(user, org)
    row = expect(member.post(notes.rows("notes"), json={"body": "mine"}), 201)
    assert [r["uid"] for r in expect(member.get(notes.rows("notes")), 200)["items"]] == [row["uid"]]


def test_user_in_two_orgs_works_in_whichever_org_they_log_into(notes: AppWorld) -> None:
    north, south = notes.org("North"), notes.org("South")
    user = notes.user()
    notes.member(north, user["uid"], ["writer"])
    notes.member(south, user["uid"], ["reader"])
    in_north, in_south = notes.login(user, north), notes.login(user, south)
    row = expect(in_north.post(notes.rows("notes"), json={"body": "north only"}), 201)
    expect(in_south.post(notes.rows("notes"), json={"body": "x"}), 403, "FORBIDDEN")
    assert expect(in_south.get(notes.rows("notes")), 200)["items"] == []
    expect(in_south.get(f"{notes.rows('notes')}/{row['uid']}"), 404, "NOT_FOUND")
    assert [r["uid"] for r in expect(in_north.get(notes.rows("notes")), 200)["items"]] == [row["uid"]]


@pytest.mark.parametrize("body", [{"roles": ["ghost"]}, {"roles": "writer"}, {}, {"roles": [1]}])
def test_admin_gets_422_for_a_membership_with_unknown_or_malformed_roles(
        notes: AppWorld, body: dict[str, Any]) -> None:
    org = notes.org("Northwind")
    user = notes.user()
    expect(notes.admin.put(f"{notes.base}/orgs/{org}/members/{user['uid']}", json=body),
           422, "VALIDATION_FAILED")
    # No membership was made: the user cannot log into the org.
    expect(_login(notes, user["email"], user["password"], org), 401, "UNAUTHENTICATED")


def test_admin_gets_404_for_a_membership_of_an_unknown_org_or_user(notes: AppWorld) -> None:
    org = notes.org("Northwind")
    user = notes.user()
    for path in (f"orgs/{uuid.uuid4()}/members/{user['uid']}",
                 f"orgs/{org}/members/{uuid.uuid4()}", f"orgs/{org}/members/nobody"):
        expect(notes.admin.put(f"{notes.base}/{path}", json={"roles": ["reader"]}),
               404, "NOT_FOUND")
    assert expect(notes.admin.get(f"{notes.base}/orgs/{org}/members"), 200)["items"] == []
    expect(_login(notes, user["email"], user["password"], org), 401, "UNAUTHENTICATED")


def test_admin_cannot_add_a_user_of_another_app_to_an_org(notes: AppWorld,
                                                          server: ServerProcess) -> None:
    other = AppWorld.create(server, notes.admin.client)
    stranger = other.user()
    org = notes.org("Northwind")
    expect(notes.admin.put(f"{notes.base}/orgs/{org}/members/{stranger['uid']}",
                           json={"roles": ["writer"]}), 404, "NOT_FOUND")
    assert expect(notes.admin.get(f"{notes.base}/orgs/{org}/members"), 200)["items"] == []


def test_removed_member_gets_401_with_the_access_token_they_still_hold(notes: AppWorld) -> None:
    org = notes.org("Northwind")
    member = notes.caller(org, ["writer"])
    expect(member.get(notes.rows("notes")), 200)
    resp = notes.admin.delete(f"{notes.base}/orgs/{org}/members/{member.user_uid}")
    assert resp.status_code == 204
    expect(member.get(notes.rows("notes")), 401, "UNAUTHENTICATED")
    expect(member.post(notes.rows("notes"), json={"body": "x"}), 401, "UNAUTHENTICATED")
    expect(notes.admin.client.post(f"/{notes.name}/auth/refresh",
                                   json={"refresh_token": member.refresh_token}),
           401, "UNAUTHENTICATED")
    expect(notes.admin.delete(f"{notes.base}/orgs/{org}/members/{member.user_uid}"),
           404, "NOT_FOUND")


def test_removing_one_membership_leaves_the_users_other_org_working(notes: AppWorld) -> None:
    north, south = notes.org("North"), notes.org("South")
    user = notes.user()
    notes.member(north, user["uid"], ["writer"])
    notes.member(south, user["uid"], ["writer"])
    in_north, in_south = notes.login(user, north), notes.login(user, south)
    expect(notes.admin.delete(f"{notes.base}/orgs/{north}/members/{user['uid']}"), 204)
    expect(in_north.get(notes.rows("notes")), 401, "UNAUTHENTICATED")
    expect(in_south.get(notes.rows("notes")), 200)


def test_member_whose_role_changes_feels_it_on_the_very_next_request(notes: AppWorld) -> None:
    org = notes.org("Northwind")
    member = notes.caller(org, ["reader"])
    expect(member.post(notes.rows("notes"), json={"body": "x"}), 403, "FORBIDDEN")
    notes.member(org, str(member.user_uid), ["writer"])
    row = expect(member.post(notes.rows("notes"), json={"body": "x"}), 201)
    notes.member(org, str(member.user_uid), ["reader"])
    expect(member.delete(f"{notes.rows('notes')}/{row['uid']}"), 403, "FORBIDDEN")
    notes.member(org, str(member.user_uid), [])
    expect(member.get(notes.rows("notes")), 403, "FORBIDDEN")


# Roles -----------------------------------------------------------------------------------

def test_admin_puts_gets_lists_and_deletes_roles(world: AppWorld) -> None:
    world.table("invoices", [{"name": "status", "type": "text"},
                             {"name": "amount", "type": "numeric"}])
    body = {"permissions": ["invoices:read_list", "invoices:read", "invoices:create", "vendors:*"],
            "rowPolicies": {"invoices": {"status": {"ne": "draft"}}},
            "redact": {"invoices": ["amount"]}}
    saved = expect(world.admin.put(f"{world.base}/roles/clerk", json=body), 200)
    assert {k: saved[k] for k in body} == body
    assert expect(world.admin.get(f"{world.base}/roles/clerk"), 200) == saved
    world.role("auditor", ["*:*"])
    listed = expect(world.admin.get(f"{world.base}/roles"), 200)["items"]
    assert sorted(r["name"] for r in listed) == ["auditor", "clerk"]
    replaced = expect(world.admin.put(f"{world.base}/roles/clerk",
                                      json={"permissions": ["invoices:read"]}), 200)
    assert replaced["permissions"] == ["invoices:read"]
    assert replaced["rowPolicies"] == {} and replaced["redact"] == {}
    assert world.admin.delete(f"{world.base}/roles/clerk").status_code == 204
    expect(world.admin.get(f"{world.base}/roles/clerk"), 404, "NOT_FOUND")
    expect(world.admin.delete(f"{world.base}/roles/clerk"), 404, "NOT_FOUND")
    assert [r["name"] for r in expect(world.admin.get(f"{world.base}/roles"), 200)["items"]] == [
        "auditor"]


@pytest.mark.parametrize("body", [
    {"permissions": ["invoices"]},
    {"permissions": ["invoices:approve"]},
    {"permissions": ["Invoices:read"]},
    {"permissions": "invoices:read"},
    {"permissions": [], "rowPolicies": {"invoices": "status = 'x'"}},
    {"permissions": [], "redact": {"invoices": "amount"}},
    {"permissions": [], "grants": ["*:*"]},
    ["invoices:read"],
])
def test_admin_gets_422_for_a_malformed_role_and_nothing_is_saved(world: AppWorld,
                                                                  body: Any) -> None:
    expect(world.admin.put(f"{world.base}/roles/clerk", json=body), 422, "VALIDATION_FAILED")
    expect(world.admin.get(f"{world.base}/roles/clerk"), 404, "NOT_FOUND")


@pytest.mark.parametrize("name", ["Clerk", "1clerk", "cl-erk", "a" * 64])
def test_admin_gets_422_for_a_role_name_outside_the_pattern(world: AppWorld, name: str) -> None:
    expect(world.admin.put(f"{world.base}/roles/{name}", json={"permissions": []}),
           422, "VALIDATION_FAILED")


def test_member_loses_access_on_the_next_request_when_their_role_is_deleted(
        notes: AppWorld) -> None:
    org = notes.org("Northwind")
    member = notes.caller(org, ["writer"])
    expect(member.get(notes.rows("notes")), 200)
    assert notes.admin.delete(f"{notes.base}/roles/writer").status_code == 204
    expect(member.get(notes.rows("notes")), 403, "FORBIDDEN")
    # Re-creating a role of that name does not silently restore the old grant.
    notes.role("writer", ["notes:*"])
    expect(member.get(notes.rows("notes")), 403, "FORBIDDEN")


def test_member_with_star_star_may_do_everything_on_every_table(notes: AppWorld) -> None:
    notes.table("tags", [{"name": "label", "type": "text"}])
    notes.role("owner", ["*:*"])
    member = notes.caller(notes.org("Northwind"), ["owner"])
    for table, column in (("notes", "body"), ("tags", "label")):
        row = expect(member.post(notes.rows(table), json={column: "first"}), 201)
        path = f"{notes.rows(table)}/{row['uid']}"
        expect(member.patch(path, json={column: "second"}), 200)
        assert [r[column] for r in expect(member.get(notes.rows(table)), 200)["items"]] == [
            "second"]
        assert expect(member.get(path), 200)[column] == "second"
        assert member.delete(path).status_code == 204
        expect(member.get(path), 404, "NOT_FOUND")
        assert expect(member.get(notes.rows(table)), 200)["items"] == []


def test_member_with_one_action_may_do_exactly_that_action(notes: AppWorld) -> None:
    org = notes.org("Northwind")
    writer = notes.caller(org, ["writer"])
    row = expect(writer.post(notes.rows("notes"), json={"body": "b"}), 201)
    path = f"{notes.rows('notes')}/{row['uid']}"
    calls = {
        "read_list": lambda c: c.get(notes.rows("notes")),
        "read": lambda c: c.get(path),
        "create": lambda c: c.post(notes.rows("notes"), json={"body": "n"}),
        "update": lambda c: c.patch(path, json={"body": "u"}),
        "delete": lambda c: c.delete(path),
    }
    for action in calls:
        notes.role(f"only_{action}", [f"notes:{action}"])
        member: Caller = notes.caller(org, [f"only_{action}"])
        for other, call in calls.items():
            if other != action:
                expect(call(member), 403, "FORBIDDEN")

    def bodies() -> list[str]:
        return sorted(r["body"] for r in expect(writer.get(notes.rows("notes")), 200)["items"])

    allowed = {action: notes.caller(org, [f"only_{action}"]) for action in calls}
    assert [r["uid"] for r in expect(calls["read_list"](allowed["read_list"]), 200)["items"]] == [
        row["uid"]]
    assert expect(calls["read"](allowed["read"]), 200)["body"] == "b"
    # A writer who may not read gets {"uid": ...} alone (contract): another member reads it.
    expect(calls["create"](allowed["create"]), 201)
    assert bodies() == ["b", "n"]
    expect(calls["update"](allowed["update"]), 200)
    assert bodies() == ["n", "u"]
    assert calls["delete"](allowed["delete"]).status_code == 204
    assert bodies() == ["n"]


def test_several_roles_combine_permissively(notes: AppWorld) -> None:
    notes.role("lister", ["notes:read_list"])
    notes.role("creator", ["notes:create"])
    member = notes.caller(notes.org("Northwind"), ["lister", "creator"])
    row = expect(member.post(notes.rows("notes"), json={"body": "b"}), 201)
    # `create` without `read`: the writer gets the uid alone.
    assert row == {"uid": row["uid"]}
    assert [r["uid"] for r in expect(member.get(notes.rows("notes")), 200)["items"]] == [row["uid"]]
    expect(member.get(f"{notes.rows('notes')}/{row['uid']}"), 403, "FORBIDDEN")


def test_a_redacted_column_keeps_its_key_and_shows_redacted(notes: AppWorld) -> None:
    org = notes.org("Northwind")
    writer = notes.caller(org, ["writer"])
    row = expect(writer.post(notes.rows("notes"), json={"body": "b", "price": "9.99"}), 201)
    notes.role("clerk", ["notes:read", "notes:read_list"], redact={"notes": ["price"]})
    clerk = notes.caller(org, ["clerk"])
    got = expect(clerk.get(f"{notes.rows('notes')}/{row['uid']}"), 200)
    assert got["price"] == "[redacted]" and got["body"] == "b"
    assert expect(clerk.get(notes.rows("notes")), 200)["items"] == [got]
    # Another role granting read without redaction lifts it.
    notes.member(org, str(clerk.user_uid), ["clerk", "reader"])
    assert expect(clerk.get(f"{notes.rows('notes')}/{row['uid']}"), 200)["price"] == "9.99"


def test_a_row_policy_naming_the_principal_limits_rows_to_their_own(notes: AppWorld) -> None:
    org = notes.org("Northwind")
    notes.role("own", ["notes:*"], row_policies={"notes": {"owner": {"eq": {"$principal": "email"}}}})
    ada_user, bob_user = notes.user(), notes.user()
    notes.member(org, ada_user["uid"], ["own"])
    notes.member(org, bob_user["uid"], ["own"])
    ada, bob = notes.login(ada_user, org), notes.login(bob_user, org)
    mine = expect(ada.post(notes.rows("notes"), json={"body": "a", "owner": ada_user["email"]}), 201)
    expect(ada.post(notes.rows("notes"), json={"body": "a", "owner": bob_user["email"]}),
           403, "FORBIDDEN")
    assert [r["uid"] for r in expect(ada.get(notes.rows("notes")), 200)["items"]] == [mine["uid"]]
    assert expect(bob.get(notes.rows("notes")), 200)["items"] == []
    expect(bob.get(f"{notes.rows('notes')}/{mine['uid']}"), 404, "NOT_FOUND")
    expect(bob.patch(f"{notes.rows('notes')}/{mine['uid']}", json={"body": "x"}), 404, "NOT_FOUND")
    expect(bob.delete(f"{notes.rows('notes')}/{mine['uid']}"), 404, "NOT_FOUND")
    assert expect(ada.get(f"{notes.rows('notes')}/{mine['uid']}"), 200)["body"] == "a"
