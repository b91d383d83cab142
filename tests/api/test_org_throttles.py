"""Throttles on what a signed-in user does that reaches others (section 3a): invitations,
which mail strangers in the app's name, and orgs users create.

Callers: a lead and a second lead of one org inviting many addresses, or one address again and
again; users of an app that lets them create orgs, creating many. The server counts with low
limits: 2 mails per address a minute, 3 invitations per inviting user and 5 per client address
an hour, 2 orgs per user and 4 per client address an hour (refused attempts count too).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.accounts import mails_to, new_email
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server


@pytest.fixture(scope="module")
def throttled(database_url: str, tmp_path_factory: pytest.TempPathFactory,
              ) -> Iterator[ServerProcess]:
    proc = start_server(database_url, tmp_path_factory.mktemp("org-throttles"),
                        AUTHORIC_MAIL_ACCOUNT_LIMIT="2",
                        AUTHORIC_INVITATION_ACCOUNT_LIMIT="3", AUTHORIC_INVITATION_RATE_LIMIT="5",
                        AUTHORIC_ORG_CREATION_ACCOUNT_LIMIT="2",
                        AUTHORIC_ORG_CREATION_RATE_LIMIT="4")
    yield proc
    proc.stop()


@pytest.fixture
def world(throttled: ServerProcess) -> Iterator[AppWorld]:
    with httpx.Client(base_url=throttled.url, timeout=30) as client:
        yield AppWorld.create(throttled, client)


@pytest.fixture
def leads(world: AppWorld) -> tuple[Caller, Caller]:
    expect(world.admin.put(f"{world.base}/roles/clerk", json={"permissions": []}), 200)
    expect(world.admin.put(f"{world.base}/roles/lead", json={
        "permissions": ["org.members:*"], "grants": ["clerk"]}), 200)
    org = world.org("Acme")
    return world.caller(org, ["lead"]), world.caller(org, ["lead"])


def invite(world: AppWorld, lead: Caller, email: str) -> httpx.Response:
    return lead.post(f"/{world.name}/org/invitations", json={"email": email, "roles": ["clerk"]})


def over_limit(response: httpx.Response, limit: str, window: int) -> None:
    refused = expect(response, 429, "TOO_MANY_REQUESTS")
    assert refused["error"]["details"]["limit"] == limit
    assert 1 <= int(response.headers["Retry-After"]) <= window


def test_a_lead_inviting_one_address_again_and_again_mails_it_at_most_the_mail_limit(
        world: AppWorld, leads: tuple[Caller, Caller]) -> None:
    lead, other = leads
    email = new_email()
    for _ in range(2):
        expect(invite(world, lead, email), 201)
    over_limit(invite(world, other, email.upper()), "mail_account", 60)
    assert len(mails_to(world, email)) == 2


def test_a_lead_inviting_many_addresses_is_stopped_per_user_then_per_client_address(
        world: AppWorld, leads: tuple[Caller, Caller]) -> None:
    lead, other = leads
    for _ in range(3):
        expect(invite(world, lead, new_email()), 201)
    refused = new_email()
    over_limit(invite(world, lead, refused), "invitation_account", 3600)
    assert mails_to(world, refused) == []
    # Another member of the org has a count of their own, but shares the address's.
    expect(invite(world, other, new_email()), 201)
    over_limit(invite(world, other, new_email()), "invitation_client", 3600)
    assert len(expect(lead.get(f"/{world.name}/org/invitations"), 200)["items"]) == 4


def test_users_creating_orgs_are_stopped_per_user_then_per_client_address(
        world: AppWorld) -> None:
    expect(world.admin.put(f"{world.base}/roles/owner", json={"permissions": ["*:*"]}), 200)
    expect(world.admin.patch(world.base, json={"settings": {
        "orgCreation": "users", "orgOwnerRoles": ["owner"]}}), 200)
    first, second = (world.login(world.user()) for _ in range(2))

    def create(caller: Caller, name: str) -> httpx.Response:
        return caller.post(f"/{world.name}/orgs", json={"name": name})

    for name in ("One", "Two"):
        expect(create(first, name), 201)
    over_limit(create(first, "Three"), "org_creation_account", 3600)
    expect(create(second, "Four"), 201)
    over_limit(create(second, "Five"), "org_creation_client", 3600)
    names: list[dict[str, Any]] = expect(world.admin.get(f"{world.base}/orgs"), 200)["items"]
    assert sorted(o["name"] for o in names) == ["Four", "One", "Two"]
