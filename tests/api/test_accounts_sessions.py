"""Who am I, switching org, and sessions (contract section 3).

Callers: members of several orgs, users with account tokens, and users ending one of their
sessions from another; the operator listing and revoking a user's sessions."""

from __future__ import annotations

from tests.accounts import account_caller, open_sign_up, signed_up
from tests.scenario import AppWorld, Caller, expect


def test_a_member_of_two_orgs_switches_to_the_other_and_both_sessions_stay(
        world: AppWorld) -> None:
    north, south, other = world.org("North"), world.org("South"), world.org("Other")
    world.role("a", [])
    world.role("b", [])
    user = world.user()
    world.member(north, user["uid"], ["a"])
    world.member(south, user["uid"], ["b"])
    caller = world.login(user, north)
    me = expect(caller.get(f"/{world.name}/auth/me"), 200)
    assert me["org"] == north and me["roles"] == ["a"]
    assert {m["org"] for m in me["memberships"]} == {north, south}
    pair = expect(caller.post(f"/{world.name}/auth/switch", json={"org": south}), 200)
    switched = Caller(world.admin.client, pair["access_token"])
    assert expect(switched.get(f"/{world.name}/auth/me"), 200)["org"] == south
    expect(caller.get(f"/{world.name}/auth/me"), 200)
    expect(caller.post(f"/{world.name}/auth/switch", json={"org": other}), 404, "NOT_FOUND")
    expect(caller.post(f"/{world.name}/auth/switch", json={"org": "nope"}), 404, "NOT_FOUND")


def test_an_account_token_switches_into_an_org_the_user_joined(world: AppWorld) -> None:
    open_sign_up(world)
    person = signed_up(world)
    caller = account_caller(world, person)
    me = expect(caller.get(f"/{world.name}/auth/me"), 200)
    org = world.org("Joined")
    world.role("viewer", [])
    world.member(org, me["user"]["uid"], ["viewer"])
    pair = expect(caller.post(f"/{world.name}/auth/switch", json={"org": org}), 200)
    assert expect(Caller(world.admin.client, pair["access_token"]).get(
        f"/{world.name}/auth/me"), 200)["roles"] == ["viewer"]


def test_a_user_sees_one_session_per_sign_in_and_ends_another_one(world: AppWorld) -> None:
    org = world.org("Northwind")
    user = world.user()
    world.member(org, user["uid"], [])
    client = world.admin.client
    here = world.login(user, org)
    there_pair = expect(client.post(f"/{world.name}/auth/token", headers={
        "User-Agent": "Phone/1.0"}, json={"email": user["email"], "password": user["password"],
                                          "org": org}), 200)
    expect(client.post(f"/{world.name}/auth/refresh",
                       json={"refresh_token": there_pair["refresh_token"]}), 200)
    sessions = expect(here.get(f"/{world.name}/auth/sessions"), 200)["items"]
    assert len(sessions) == 2  # the refresh stayed in its session
    current = [s for s in sessions if s["current"]]
    phone = [s for s in sessions if not s["current"]]
    assert len(current) == 1 and phone[0]["userAgent"] == "Phone/1.0"
    assert phone[0]["lastUsedAt"] >= phone[0]["createdAt"]
    expect(here.delete(f"/{world.name}/auth/sessions/{phone[0]['id']}"), 204)
    left = expect(here.get(f"/{world.name}/auth/sessions"), 200)["items"]
    assert [s["id"] for s in left] == [current[0]["id"]]
    expect(here.delete(f"/{world.name}/auth/sessions/{phone[0]['id']}"), 404)


def test_a_user_cannot_end_someone_elses_session(world: AppWorld) -> None:
    org = world.org("Northwind")
    mine, theirs = world.caller(org, []), world.caller(org, [])
    their_session = expect(theirs.get(f"/{world.name}/auth/sessions"), 200)["items"][0]["id"]
    expect(mine.delete(f"/{world.name}/auth/sessions/{their_session}"), 404)
    assert len(expect(theirs.get(f"/{world.name}/auth/sessions"), 200)["items"]) == 1


def test_the_operator_lists_and_ends_a_users_sessions(world: AppWorld) -> None:
    org = world.org("Northwind")
    user = world.user()
    world.member(org, user["uid"], [])
    caller = world.login(user, org)
    path = f"{world.base}/users/{user['uid']}/sessions"
    [session] = expect(world.admin.get(path), 200)["items"]
    assert session["current"] is False
    expect(world.admin.delete(f"{path}/{session['id']}"), 204)
    expect(world.admin.client.post(f"/{world.name}/auth/refresh",
                                   json={"refresh_token": caller.refresh_token}), 401)
    assert expect(world.admin.get(path), 200)["items"] == []


def test_an_ended_session_ends_its_account_tokens_at_once(world: AppWorld) -> None:
    open_sign_up(world)
    caller = account_caller(world, signed_up(world))
    [session] = expect(caller.get(f"/{world.name}/auth/sessions"), 200)["items"]
    expect(caller.delete(f"/{world.name}/auth/sessions/{session['id']}"), 204)
    expect(caller.get(f"/{world.name}/auth/me"), 401, "UNAUTHENTICATED")


def test_a_caller_without_credentials_gets_401_on_bearer_routes_whatever_the_body(
        world: AppWorld) -> None:
    client = world.admin.client
    routes = ["auth/password", "auth/switch", "orgs", "org/keys", "org/invitations"]
    for route in routes:
        for body in (b'{"name": "\\u0000"}', b"not json", b"[1, 2]"):
            headers = {"content-type": "application/json"}
            expect(client.post(f"/{world.name}/{route}", content=body, headers=headers),
                   401, "UNAUTHENTICATED")
            headers["authorization"] = "Bearer not-a-token"
            expect(client.post(f"/{world.name}/{route}", content=body, headers=headers),
                   401, "UNAUTHENTICATED")
    expect(client.put(f"/{world.name}/org/members/someone", content=b"{}",
                      headers={"content-type": "application/json"}), 401, "UNAUTHENTICATED")
