"""Member lists (contract section 2): an org's members page by page, and a user's memberships."""

from __future__ import annotations

import uuid

from tests.scenario import AppWorld, expect


def test_admin_pages_through_an_orgs_members_with_email_and_roles(world: AppWorld) -> None:
    world.role("clerk", [])
    world.role("boss", [])
    north, south = world.org("Northwind"), world.org("Southwind")
    users = [world.user() for _ in range(5)]
    for i, user in enumerate(users):
        world.member(north, user["uid"], ["clerk"] if i % 2 else ["boss", "clerk"])
    world.member(south, users[0]["uid"], ["clerk"])  # another org's membership is not listed

    seen: list[dict[str, object]] = []
    after: str | None = None
    pages = 0
    while True:
        query = f"?limit=2&after={after}" if after else "?limit=2"
        page = expect(world.admin.get(f"{world.base}/orgs/{north}/members{query}"), 200)
        assert len(page["items"]) <= 2
        seen += page["items"]
        pages += 1
        after = page["next"]
        if after is None:
            break
    assert pages == 3
    by_user = {m["user"]: m for m in seen}
    assert set(by_user) == {u["uid"] for u in users}
    for i, user in enumerate(users):
        member = by_user[user["uid"]]
        assert member.pop("joinedAt").endswith("Z")
        assert member == {"org": north, "user": user["uid"], "email": user["email"],
                          "roles": ["clerk"] if i % 2 else ["boss", "clerk"]}


def test_admin_lists_an_org_without_members_as_empty(world: AppWorld) -> None:
    org = world.org("Empty")
    assert expect(world.admin.get(f"{world.base}/orgs/{org}/members"), 200) == {
        "items": [], "next": None}


def test_admin_gets_400_for_a_bad_limit_or_cursor_and_404_for_an_unknown_org(
        world: AppWorld) -> None:
    org = world.org("Northwind")
    # A superscript two passes str.isdigit() and fails int(): it once answered 500.
    for query in ("?limit=0", "?limit=1001", "?limit=x", "?limit=%C2%B2", "?after=not-a-uid"):
        expect(world.admin.get(f"{world.base}/orgs/{org}/members{query}"), 400, "BAD_REQUEST")
    expect(world.admin.get(f"{world.base}/orgs/{uuid.uuid4()}/members"), 404, "NOT_FOUND")


def test_admin_lists_a_users_memberships_with_org_names_and_roles(world: AppWorld) -> None:
    world.role("clerk", [])
    north, south = world.org("Northwind"), world.org("Southwind")
    user, other = world.user(), world.user()
    world.member(north, user["uid"], ["clerk"])
    world.member(south, user["uid"], [])
    world.member(south, other["uid"], ["clerk"])
    got = expect(world.admin.get(f"{world.base}/users/{user['uid']}/memberships"), 200)
    assert got == {"items": [{"org": north, "orgName": "Northwind", "roles": ["clerk"]},
                             {"org": south, "orgName": "Southwind", "roles": []}]}
    expect(world.admin.delete(f"{world.base}/orgs/{north}/members/{user['uid']}"), 204)
    got = expect(world.admin.get(f"{world.base}/users/{user['uid']}/memberships"), 200)
    assert [m["org"] for m in got["items"]] == [south]
    expect(world.admin.get(f"{world.base}/users/{uuid.uuid4()}/memberships"), 404, "NOT_FOUND")


def test_an_app_user_token_cannot_list_members(world: AppWorld) -> None:
    org = world.org("Northwind")
    world.role("clerk", [])
    member = world.caller(org, ["clerk"])
    expect(member.get(f"{world.base}/orgs/{org}/members"), 401, "UNAUTHENTICATED")
    expect(member.get(f"{world.base}/users/{member.user_uid}/memberships"), 401,
           "UNAUTHENTICATED")
