"""Sessions end with the membership (issue 10, item 5).

Callers: a member removed from an org and later added back, and a user deleted by the admin,
each still holding the refresh token of a session they had before.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.scenario import AppWorld, Caller, expect


def _refresh(world: AppWorld, caller: Caller) -> httpx.Response:
    return world.admin.client.post(f"/{world.name}/auth/refresh",
                                   json={"refresh_token": caller.refresh_token})


def _member(world: AppWorld) -> tuple[str, dict[str, Any], Caller]:
    org = world.org("North")
    world.role("reader", [])
    user = world.user()
    world.member(org, user["uid"], ["reader"])
    return org, user, world.login(user, org)


def test_member_removed_then_added_back_cannot_refresh_the_old_session(world: AppWorld) -> None:
    org, user, member = _member(world)
    expect(world.admin.delete(f"{world.base}/orgs/{org}/members/{user['uid']}"), 204)
    world.member(org, user["uid"], ["reader"])
    expect(_refresh(world, member), 401, "UNAUTHENTICATED")
    # A new login is a new session, and it works.
    again = world.login(user, org)
    expect(_refresh(world, again), 200)


def test_removal_from_one_org_leaves_the_sessions_in_other_orgs(world: AppWorld) -> None:
    org, user, in_north = _member(world)
    south = world.org("South")
    world.member(south, user["uid"], ["reader"])
    in_south = world.login(user, south)
    expect(world.admin.delete(f"{world.base}/orgs/{org}/members/{user['uid']}"), 204)
    world.member(org, user["uid"], ["reader"])
    expect(_refresh(world, in_north), 401, "UNAUTHENTICATED")
    expect(_refresh(world, in_south), 200)


def test_deleted_user_cannot_refresh_a_session(world: AppWorld) -> None:
    _, user, member = _member(world)
    expect(world.admin.delete(f"{world.base}/users/{user['uid']}"), 204)
    expect(_refresh(world, member), 401, "UNAUTHENTICATED")
