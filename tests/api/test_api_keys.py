"""API keys (section 3b): created by the operator or a member within their grants, a bearer on
the table routes only, judged as a member is, expiring, and revoked on every replica with
their streams told so.

Callers: the operator; an owner and a clerk of an org; a backend job holding a key; against
two server processes of one deployment with the test clock (AUTHORIC_TEST_CLOCK_FILE) and a
per-principal stream cap of 2.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ADMIN_TOKEN, ServerProcess, start_server
from tests.sse import SSEClient

CAP = 2


@dataclass
class Deployment:
    server: ServerProcess
    replica: ServerProcess
    client: httpx.Client
    clock_file: Path

    def advance(self, seconds: float) -> None:
        self.clock_file.write_text(str(float(self.clock_file.read_text() or 0) + seconds))

    def last_used_writes(self) -> float:
        """The lastUsedAt writes the first server has started, from its metrics."""
        metrics = self.client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert metrics.status_code == 200
        found = re.search(r"^authoric_api_key_last_used_writes_total (\S+)$", metrics.text, re.M)
        assert found is not None
        return float(found.group(1))


@pytest.fixture(scope="module")
def deployment(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    data = tmp_path_factory.mktemp("keys")
    clock_file = data / "clock-offset"
    clock_file.write_text("0")
    env = {"AUTHORIC_TEST_CLOCK_FILE": str(clock_file),
           "AUTHORIC_SSE_MAX_STREAMS_PER_USER": str(CAP)}
    server = start_server(database_url, data, **env)
    replica = start_server(database_url, data, **env)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield Deployment(server, replica, client, clock_file)
    replica.stop()
    server.stop()


@pytest.fixture
def shop(deployment: Deployment) -> dict[str, Any]:
    """An app with notes owned by whoever wrote them, an owner who hands out any role and a
    clerk who may not touch keys."""
    deployment.clock_file.write_text("0")
    world = AppWorld.create(deployment.server, deployment.client)
    world.table("notes", [{"name": "text", "type": "text"}, {"name": "owner", "type": "uuid"},
                          {"name": "email", "type": "text"}])
    expect(world.admin.put(f"{world.base}/roles/owner", json={
        "permissions": ["*:*"], "grants": ["owner", "writer"]}), 200)
    expect(world.admin.put(f"{world.base}/roles/writer", json={
        "permissions": ["notes:*"],
        "rowPolicies": {"notes": {"owner": {"eq": {"$principal": "uid"}}}}}), 200)
    expect(world.admin.put(f"{world.base}/roles/mailer", json={
        "permissions": ["notes:*"],
        "rowPolicies": {"notes": {"email": {"eq": {"$principal": "email"}}}}}), 200)
    expect(world.admin.put(f"{world.base}/roles/clerk", json={"permissions": ["notes:*"]}), 200)
    org = world.org("Acme")
    return {"world": world, "org": org, "owner": world.caller(org, ["owner"]),
            "clerk": world.caller(org, ["clerk"])}


def keys_path(shop: dict[str, Any]) -> str:
    return f"{shop['world'].base}/orgs/{shop['org']}/keys"


def new_key(shop: dict[str, Any], roles: list[str], **extra: Any) -> dict[str, Any]:
    return expect(shop["world"].admin.post(keys_path(shop), json={
        "name": "nightly job", "roles": roles, **extra}), 201)


def bearer(client: httpx.Client, key: str) -> Caller:
    return Caller(client, key)


def test_the_operator_creates_a_key_shown_once_and_listed_without_it(shop: dict[str, Any]) -> None:
    created = new_key(shop, ["writer"])
    assert created["key"].startswith("ak_") and len(created["key"]) >= 3 + 43
    assert {k: created[k] for k in ("name", "org", "roles", "expiresAt", "lastUsedAt")} == {
        "name": "nightly job", "org": shop["org"], "roles": ["writer"], "expiresAt": None,
        "lastUsedAt": None}
    assert created["uid"] and created["createdAt"].endswith("Z")
    listed = expect(shop["world"].admin.get(keys_path(shop)), 200)["items"]
    assert [k["uid"] for k in listed] == [created["uid"]]
    assert "key" not in listed[0]
    audit = expect(shop["world"].admin.get(f"{shop['world'].base}/audit"), 200)["items"]
    assert created["key"] not in str(audit)
    assert audit[0]["action"] == "key.create" and audit[0]["actor"] == {"kind": "operator"}


def test_a_key_acts_as_a_member_whose_uid_is_the_keys_and_whose_email_is_null(
        shop: dict[str, Any], deployment: Deployment) -> None:
    world = shop["world"]
    created = new_key(shop, ["writer"])
    job = bearer(deployment.client, created["key"])
    # The writer's row policy names $principal.uid: the key writes rows it owns, and only those.
    mine = expect(job.post(world.rows("notes"), json={"text": "by job", "owner": created["uid"]}), 201)
    expect(job.post(world.rows("notes"), json={"text": "forged", "owner": shop["owner"].user_uid}),
           403, "FORBIDDEN")
    expect(shop["owner"].post(world.rows("notes"), json={"text": "owner's"}), 201)
    listed = expect(job.get(world.rows("notes")), 200)["items"]
    assert [r["uid"] for r in listed] == [mine["uid"]]
    # $principal.email is null: a policy on the email matches nothing.
    mailer = bearer(deployment.client, new_key(shop, ["mailer"])["key"])
    expect(shop["owner"].post(world.rows("notes"), json={"text": "no email", "email": None}), 201)
    assert expect(mailer.get(world.rows("notes")), 200)["items"] == []
    # The change log records the key as the change's actor, as it does a member.
    assert expect(job.get(f"{world.rows('notes')}/{mine['uid']}"), 200)["owner"] == created["uid"]


def test_a_key_is_refused_outside_the_table_routes(shop: dict[str, Any],
                                                   deployment: Deployment) -> None:
    world = shop["world"]
    job = bearer(deployment.client, new_key(shop, ["owner"])["key"])
    expect(job.get(world.rows("notes")), 200)
    for path in ("/admin/apps", world.base, f"/{world.name}/openapi.json",
                 f"/{world.name}/auth/me", f"/{world.name}/org/members"):
        expect(job.get(path), 401)
    expect(job.post(f"/{world.name}/auth/logout", json={"refresh_token": "x"}), 401)


def test_a_key_of_another_app_or_an_unknown_key_is_refused(shop: dict[str, Any],
                                                          deployment: Deployment) -> None:
    other = AppWorld.create(deployment.server, deployment.client)
    other.table("notes", [{"name": "text", "type": "text"}])
    job = bearer(deployment.client, new_key(shop, ["owner"])["key"])
    expect(job.get(other.rows("notes")), 401, "UNAUTHENTICATED")
    expect(bearer(deployment.client, "ak_" + "A" * 43).get(shop["world"].rows("notes")), 401,
           "UNAUTHENTICATED")


def test_a_revoked_key_is_refused_by_the_next_request_on_every_replica(
        shop: dict[str, Any], deployment: Deployment) -> None:
    world = shop["world"]
    created = new_key(shop, ["owner"])
    urls = (deployment.server.url, deployment.replica.url)
    for url in urls:  # both replicas have resolved (and cached) the key
        assert httpx.get(f"{url}{world.rows('notes')}", timeout=30,
                         headers={"Authorization": f"Bearer {created['key']}"}).status_code == 200
    expect(world.admin.delete(f"{keys_path(shop)}/{created['uid']}"), 204)
    for url in urls:
        answer = httpx.get(f"{url}{world.rows('notes')}", timeout=30,
                           headers={"Authorization": f"Bearer {created['key']}"})
        assert (answer.status_code, answer.json()["error"]["code"]) == (401, "UNAUTHENTICATED")
    expect(world.admin.delete(f"{keys_path(shop)}/{created['uid']}"), 404)


def test_a_revoked_keys_open_streams_get_reauth_revoked_and_close(
        shop: dict[str, Any], deployment: Deployment) -> None:
    world = shop["world"]
    created = new_key(shop, ["owner"])
    per_table = SSEClient(deployment.replica.url, f"{world.rows('notes')}/subscribe", created["key"])
    several = SSEClient(deployment.server.url, f"/{world.name}/subscribe", created["key"],
                        params={"tables": "notes"})
    with per_table, several:
        for stream in (per_table, several):
            assert stream.status_code == 200
            stream.wait_connected()
        expect(world.admin.delete(f"{keys_path(shop)}/{created['uid']}"), 204)
        for stream in (per_table, several):
            stream.wait_ended(timeout=20)
            reauth = [f for f in stream.frames if f.event == "reauth"]
            assert [f.data for f in reauth] == [{"reason": "revoked"}]


def test_a_keys_streams_count_against_a_cap_of_their_own(shop: dict[str, Any],
                                                        deployment: Deployment) -> None:
    world = shop["world"]
    key = new_key(shop, ["owner"])["key"]
    path = f"{world.rows('notes')}/subscribe"
    streams = [SSEClient(deployment.server.url, path, key) for _ in range(CAP)]
    try:
        for stream in streams:
            assert stream.status_code == 200
        with SSEClient(deployment.server.url, path, key) as refused:
            assert refused.status_code == 429
            assert refused.headers.get("retry-after")
        # Another key, and the owner, have their own.
        with SSEClient(deployment.server.url, path, new_key(shop, ["owner"])["key"]) as other, \
                SSEClient(deployment.server.url, path, shop["owner"].token) as owner:
            assert (other.status_code, owner.status_code) == (200, 200)
    finally:
        for stream in streams:
            stream.close()


def test_an_expired_key_answers_token_expired(shop: dict[str, Any], deployment: Deployment) -> None:
    world = shop["world"]
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    created = new_key(shop, ["owner"], expiresAt=soon)
    assert created["expiresAt"] == soon
    job = bearer(deployment.client, created["key"])
    expect(job.get(world.rows("notes")), 200)
    deployment.advance(3601)
    expect(job.get(world.rows("notes")), 401, "TOKEN_EXPIRED")
    past = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    expect(world.admin.post(keys_path(shop), json={"name": "x", "roles": [], "expiresAt": past}),
           422, "VALIDATION_FAILED")


def test_last_used_at_is_written_at_most_once_a_minute(shop: dict[str, Any],
                                                       deployment: Deployment) -> None:
    world = shop["world"]
    created = new_key(shop, ["owner"])
    job = bearer(deployment.client, created["key"])

    def last_used() -> str | None:
        items = expect(world.admin.get(keys_path(shop)), 200)["items"]
        return next(k["lastUsedAt"] for k in items if k["uid"] == created["uid"])

    def settled(previous: str | None) -> str | None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            value = last_used()
            if value != previous:
                return value
            time.sleep(0.1)
        return previous

    expect(job.get(world.rows("notes")), 200)
    first = settled(None)
    assert first is not None
    for _ in range(5):
        expect(job.get(world.rows("notes")), 200)
    deployment.advance(30)
    writes = deployment.last_used_writes()
    expect(job.get(world.rows("notes")), 200)
    # The server decides within the request whether to write (and counts a write it starts):
    # none was started, so none can land later.
    assert deployment.last_used_writes() == writes
    assert last_used() == first
    deployment.advance(31)
    expect(job.get(world.rows("notes")), 200)
    later = settled(first)
    assert later is not None and later > first


def test_an_owner_creates_and_revokes_keys_within_their_grants(shop: dict[str, Any]) -> None:
    world, owner, clerk = shop["world"], shop["owner"], shop["clerk"]
    path = f"/{world.name}/org/keys"
    created = expect(owner.post(path, json={"name": "sync", "roles": ["writer"]}), 201)
    assert created["key"].startswith("ak_") and created["org"] == shop["org"]
    refused = expect(owner.post(path, json={"name": "too much", "roles": ["clerk"]}), 403,
                     "FORBIDDEN")
    assert refused["error"]["details"]["reason"] == "role_not_grantable"
    expect(clerk.post(path, json={"name": "mine", "roles": []}), 403, "FORBIDDEN")
    expect(clerk.get(path), 403, "FORBIDDEN")
    assert [k["uid"] for k in expect(owner.get(path), 200)["items"]] == [created["uid"]]
    # A key beyond the owner's grants (the operator's) is not theirs to revoke.
    operators = new_key(shop, ["clerk"])
    expect(owner.delete(f"{path}/{operators['uid']}"), 403, "FORBIDDEN")
    expect(owner.delete(f"{path}/{created['uid']}"), 204)
    expect(bearer(owner.client, created["key"]).get(world.rows("notes")), 401)
    entries = expect(world.admin.get(f"{world.base}/audit", params={"actor": "member"}), 200)
    assert [e["action"] for e in entries["items"]] == ["key.delete", "key.create"]
    assert created["key"] not in str(entries)


def test_a_key_of_another_org_cannot_be_revoked_by_uid(shop: dict[str, Any]) -> None:
    world = shop["world"]
    other = world.org("Globex")
    theirs = expect(world.admin.post(f"{world.base}/orgs/{other}/keys",
                                     json={"name": "x", "roles": ["writer"]}), 201)
    expect(shop["owner"].delete(f"/{world.name}/org/keys/{theirs['uid']}"), 404, "NOT_FOUND")
    expect(world.admin.delete(f"{keys_path(shop)}/{theirs['uid']}"), 404, "NOT_FOUND")
