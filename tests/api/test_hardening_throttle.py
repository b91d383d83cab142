"""Login throttling (issue 10, item 1), as a password guesser meets it.

Callers: a guesser who spells the app's uid a new way on each attempt, a guesser who sprays
one account from many client addresses, a guesser switching between two server processes of
one deployment, and a caller hammering an app that does not exist.

Client addresses are real: the loopback network answers on all of 127.0.0.0/8, so a client
bound to 127.0.0.7 is seen by the server as 127.0.0.7 (X-Forwarded-For is not involved).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.scenario import AppWorld, expect, unique
from tests.servers import ServerProcess, start_server

PER_CLIENT = 5
PER_ACCOUNT = 4
# Far longer than any test here takes: a window that opens at the first attempt and could
# close mid-test would forgive attempts and make the counts below depend on timing.
WINDOW = "3600"


@pytest.fixture(scope="module")
def guarded(database_url: str, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two server processes of one deployment (one database), with low limits."""
    env = {"AUTHORIC_TOKEN_RATE_LIMIT": str(PER_CLIENT),
           "AUTHORIC_LOGIN_ACCOUNT_LIMIT": str(PER_ACCOUNT),
           "AUTHORIC_RATE_LIMIT_WINDOW": WINDOW}
    data = tmp_path_factory.mktemp("guarded")
    first = start_server(database_url, data, **env)
    try:
        second = start_server(database_url, data, **env)
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def _client(server: ServerProcess, address: str = "127.0.0.1") -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=server.url, timeout=30, transport=transport)


@pytest.fixture
def target(world: AppWorld) -> tuple[AppWorld, dict[str, str]]:
    """An app with one member whose password the guesser does not know."""
    org = world.org("North")
    world.role("nobody", [])
    user = world.user()
    world.member(org, user["uid"], ["nobody"])
    return world, user


def _app_uid(world: AppWorld) -> uuid.UUID:
    return uuid.UUID(expect(world.admin.get(world.base), 200)["uid"])


def _spellings(uid: uuid.UUID) -> Iterator[str]:
    """The same uid written a new way each time: case mixed at random, with or without
    hyphens, braces or a `urn:uuid:` prefix. Each one finds the app."""
    rng = random.Random(7)
    while True:
        text = "".join(c.upper() if rng.random() < 0.5 else c for c in str(uid))
        yield rng.choice([text, text.replace("-", ""), "{" + text + "}", "urn:uuid:" + text])


def _guess(client: httpx.Client, app: str, email: str) -> httpx.Response:
    return client.post(f"/{app}/auth/token", json={"email": email, "password": "wrong guess"})


def _assert_throttled(response: httpx.Response, limit: str) -> None:
    body = expect(response, 429, "TOO_MANY_REQUESTS")
    retry = response.headers.get("Retry-After")
    assert retry is not None and retry.isdigit() and 1 <= int(retry) <= int(WINDOW), retry
    assert body["error"]["details"]["retryAfter"] == int(retry)
    assert body["error"]["details"]["limit"] == limit


def test_guesser_who_respells_the_app_uid_on_every_attempt_gets_429_past_the_limit(
        target: tuple[AppWorld, dict[str, str]],
        guarded: tuple[ServerProcess, ServerProcess]) -> None:
    world, _ = target
    spellings = _spellings(_app_uid(world))
    with _client(guarded[0], "127.0.0.2") as guesser:
        answers = [_guess(guesser, next(spellings), f"{unique('u')}@example.com")
                   for _ in range(40)]
    assert [r.status_code for r in answers[:PER_CLIENT]] == [401] * PER_CLIENT
    for response in answers[PER_CLIENT:]:
        _assert_throttled(response, "client")
    # The app's name is the same bucket too.
    with _client(guarded[0], "127.0.0.2") as guesser:
        _assert_throttled(_guess(guesser, world.name, "x@example.com"), "client")


def test_one_account_guessed_from_many_addresses_gets_429_past_the_account_limit(
        target: tuple[AppWorld, dict[str, str]],
        guarded: tuple[ServerProcess, ServerProcess]) -> None:
    world, user = target
    answers = []
    for i in range(PER_ACCOUNT + 3):
        with _client(guarded[0], f"127.0.1.{i + 1}") as guesser:
            # The email as another client might write it is still the same account.
            email = user["email"].upper() if i % 2 else user["email"]
            answers.append(_guess(guesser, world.name, email))
    assert [r.status_code for r in answers[:PER_ACCOUNT]] == [401] * PER_ACCOUNT
    for response in answers[PER_ACCOUNT:]:
        _assert_throttled(response, "account")
    # Past the limit even the right password is not tried, from a fresh address too.
    with _client(guarded[0], "127.0.1.200") as owner:
        response = owner.post(f"/{world.name}/auth/token",
                              json={"email": user["email"], "password": user["password"]})
        _assert_throttled(response, "account")
        # Another account of the app is not affected.
        other = world.user()
        expect(_guess(owner, world.name, other["email"]), 401, "UNAUTHENTICATED")


def test_guesser_alternating_between_two_server_processes_gets_429_past_the_limit(
        target: tuple[AppWorld, dict[str, str]],
        guarded: tuple[ServerProcess, ServerProcess]) -> None:
    world, _ = target
    first, second = (_client(s, "127.0.2.1") for s in guarded)
    with first, second:
        answers = [_guess(first if i % 2 else second, world.name, f"{unique('u')}@example.com")
                   for i in range(PER_CLIENT + 2)]
    assert [r.status_code for r in answers[:PER_CLIENT]] == [401] * PER_CLIENT
    for response in answers[PER_CLIENT:]:
        _assert_throttled(response, "client")


def test_refresh_attempts_share_the_client_budget(
        target: tuple[AppWorld, dict[str, str]],
        guarded: tuple[ServerProcess, ServerProcess]) -> None:
    world, _ = target
    with _client(guarded[1], "127.0.3.1") as guesser:
        for _ in range(PER_CLIENT):
            expect(guesser.post(f"/{world.name}/auth/refresh", json={"refresh_token": "x.y.z"}),
                   401, "UNAUTHENTICATED")
        _assert_throttled(_guess(guesser, world.name, "a@example.com"), "client")
        _assert_throttled(guesser.post(f"/{world.name}/auth/refresh",
                                       json={"refresh_token": "x.y.z"}), "client")


def test_caller_hammering_an_app_that_does_not_exist_gets_404_and_is_never_counted(
        guarded: tuple[ServerProcess, ServerProcess]) -> None:
    ghost = unique("ghost")
    with _client(guarded[0], "127.0.4.1") as caller:
        for _ in range(PER_CLIENT * 3):
            expect(_guess(caller, ghost, "a@example.com"), 404, "NOT_FOUND")
        for _ in range(PER_CLIENT * 3):  # random names: nothing to count, nothing kept
            expect(_guess(caller, unique("ghost"), "a@example.com"), 404, "NOT_FOUND")


def test_throttled_logins_in_one_app_leave_other_apps_alone(
        target: tuple[AppWorld, dict[str, str]], server: ServerProcess, http: httpx.Client,
        guarded: tuple[ServerProcess, ServerProcess]) -> None:
    world, _ = target
    neighbour = AppWorld.create(server, http)
    org = neighbour.org("South")
    neighbour.role("nobody", [])
    user = neighbour.user()
    neighbour.member(org, user["uid"], ["nobody"])
    with _client(guarded[0], "127.0.5.1") as caller:
        for _ in range(PER_CLIENT + 1):
            _guess(caller, world.name, f"{unique('u')}@example.com")
        _assert_throttled(_guess(caller, world.name, "a@example.com"), "client")
        pair = caller.post(f"/{neighbour.name}/auth/token",
                           json={"email": user["email"], "password": user["password"]})
        expect(pair, 200)

