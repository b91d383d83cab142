"""Removal means removal (issue 19, finding 3): removing a member ends every access and
impersonation token issued for that membership, on every replica, and adding the member back
makes a new membership that the old tokens do not reach.

Callers: a member whose access token was issued before the removal and is still within its
TTL, and an operator's "view as" token for that member, against two server processes of one
deployment (one database), both of which served the tokens before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server


@pytest.fixture(scope="module")
def replica(database_url: str, data_dir: Path, server: ServerProcess) -> Iterator[ServerProcess]:
    """A second server process of the session server's deployment (same database, secrets)."""
    proc = start_server(database_url, data_dir)
    yield proc
    proc.stop()


def _status(url: str, path: str, token: str) -> int:
    return httpx.get(f"{url}{path}", headers={"Authorization": f"Bearer {token}"},
                     timeout=30).status_code


def test_tokens_issued_before_a_removal_stay_dead_after_the_member_is_added_back(
        world: AppWorld, server: ServerProcess, replica: ServerProcess) -> None:
    world.table("notes", [{"name": "text", "type": "text"}])
    world.role("writer", ["notes:*"])
    org = world.org("A")
    user = world.user()
    world.member(org, user["uid"], ["writer"])
    member = world.login(user, org)
    assert member.token is not None
    view_as = expect(world.admin.post(f"{world.base}/impersonate", json={
        "user": user["uid"], "org": org, "ttl": 600}), 200)["access_token"]
    rows = world.rows("notes")
    old = {"access": member.token, "view as": view_as}
    for url in (server.url, replica.url):  # both replicas know (and cache) both tokens
        assert {k: _status(url, rows, t) for k, t in old.items()} == {"access": 200, "view as": 200}

    expect(world.admin.delete(f"{world.base}/orgs/{org}/members/{user['uid']}"), 204)
    for url in (server.url, replica.url):
        assert {k: _status(url, rows, t) for k, t in old.items()} == {"access": 401, "view as": 401}

    # Added back through the other replica, with the same roles.
    with httpx.Client(base_url=replica.url, timeout=30) as client:
        expect(Caller(client, world.server.admin_token).put(
            f"{world.base}/orgs/{org}/members/{user['uid']}", json={"roles": ["writer"]}), 200)
    for url in (server.url, replica.url):
        assert {k: _status(url, rows, t) for k, t in old.items()} == {"access": 401, "view as": 401}
    expect(member.post(rows, json={"text": "old token"}), 401, "UNAUTHENTICATED")
    # The member logs in again: a new token for the new membership works on both.
    fresh = world.login(user, org)
    assert fresh.token is not None
    for url in (server.url, replica.url):
        assert _status(url, rows, fresh.token) == 200
    assert expect(world.admin.get(f"{world.base}/tables/notes/rows"), 200)["items"] == []


def test_a_role_change_keeps_the_membership_and_its_tokens(world: AppWorld) -> None:
    world.table("notes", [{"name": "text", "type": "text"}])
    world.role("writer", ["notes:*"])
    world.role("reader", ["notes:read_list", "notes:read"])
    org = world.org("A")
    user = world.user()
    world.member(org, user["uid"], ["writer"])
    member = world.login(user, org)
    world.member(org, user["uid"], ["reader"])
    expect(member.get(world.rows("notes")), 200)
    expect(member.post(world.rows("notes"), json={"text": "x"}), 403, "FORBIDDEN")
