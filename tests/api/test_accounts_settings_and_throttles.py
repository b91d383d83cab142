"""The account settings of an app (contract section 3) and the throttles on the routes that
send mail or redeem mailed tokens.

Callers: the operator setting good and bad values; people signing up under an app's own mail
wording and links; a client hammering forgot, resend, sign-up and verify."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.accounts import mails_to, new_email, open_sign_up
from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess, start_server


@pytest.mark.parametrize("bad", [
    {"signUp": "maybe"}, {"emailVerification": "sometimes"}, {"orgCreation": "anyone"},
    {"orgOwnerRoles": ["not a name!"]}, {"passwordMinLength": 0},
    {"passwordMinLength": 2000}, {"links": {"verify": "https://app.test/verify"}},
    {"links": {"reset": "javascript:alert(1)//{token}"}}, {"links": {"other": "x"}},
    {"mailFrom": "not an address"}, {"mailFrom": "A <a@b.test>\r\nBcc: x@y.test"},
    {"mailTemplates": {"verify": {"subject": "two\nlines"}}},
    {"mailTemplates": {"welcome": {"subject": "x"}}},
])
def test_the_operator_is_refused_an_account_setting_the_server_cannot_use(
        world: AppWorld, bad: dict[str, Any]) -> None:
    expect(world.admin.patch(world.base, json={"settings": bad}), 422, "VALIDATION_FAILED")
    settings = expect(world.admin.get(world.base), 200)["settings"]
    assert settings["signUp"] == "closed" and settings["mailFrom"] is None


def test_the_operator_reads_back_the_account_settings_with_their_defaults(
        world: AppWorld) -> None:
    settings = expect(world.admin.get(world.base), 200)["settings"]
    assert {k: settings[k] for k in ("signUp", "emailVerification", "orgCreation",
                                     "orgOwnerRoles", "passwordMinLength", "mailFrom")} == {
        "signUp": "closed", "emailVerification": "required", "orgCreation": "operator",
        "orgOwnerRoles": [], "passwordMinLength": 8, "mailFrom": None}
    changed = expect(world.admin.patch(world.base, json={"settings": {
        "signUp": "invite", "orgOwnerRoles": ["owner", "owner"],
        "mailFrom": "Acme <no-reply@acme.test>",
        "links": {"verify": "https://app.test/verify?token={token}"}}}), 200)["settings"]
    assert changed["orgOwnerRoles"] == ["owner"] and changed["signUp"] == "invite"
    assert changed["links"]["verify"] == "https://app.test/verify?token={token}"


def test_mail_follows_the_apps_own_links_and_wording(world: AppWorld) -> None:
    open_sign_up(world, links={"verify": "https://app.test/verify?token={token}"},
                 mailTemplates={"verify": {"subject": "Welcome aboard ${app}",
                                           "text": "Hello ${email}: ${link}"}})
    email = new_email()
    expect(world.admin.client.post(f"/{world.name}/auth/signup",
                                   json={"email": email, "password": "a long password"}), 202)
    [mail] = mails_to(world, email)
    assert mail["subject"] == f"Welcome aboard {world.name}"
    assert mail["text"].startswith(f"Hello {email}: https://app.test/verify?token=")
    assert "https://app.test/verify?token=" in mail["html"]  # the server's HTML, own link


@pytest.fixture(scope="module")
def throttled(database_url: str, tmp_path_factory: pytest.TempPathFactory,
              ) -> Iterator[ServerProcess]:
    proc = start_server(database_url, tmp_path_factory.mktemp("throttled"),
                        AUTHORIC_MAIL_ACCOUNT_LIMIT="2", AUTHORIC_MAIL_RATE_LIMIT="6")
    yield proc
    proc.stop()


@pytest.fixture
def hammered(throttled: ServerProcess) -> Iterator[AppWorld]:
    with httpx.Client(base_url=throttled.url, timeout=30) as client:
        world = AppWorld.create(throttled, client)
        open_sign_up(world)
        yield world


def test_forgot_for_one_email_past_its_limit_gets_429_and_no_more_mail(
        hammered: AppWorld) -> None:
    user = hammered.user()
    path = f"/{hammered.name}/auth/password/forgot"
    for _ in range(2):
        expect(hammered.admin.client.post(path, json={"email": user["email"]}), 202)
    over = hammered.admin.client.post(path, json={"email": user["email"]})
    expect(over, 429, "TOO_MANY_REQUESTS")
    assert 1 <= int(over.headers["Retry-After"]) <= 60
    assert len(mails_to(hammered, user["email"])) == 2
    unknown = new_email()  # an unknown email is counted the same: no answer tells them apart
    for _ in range(2):
        expect(hammered.admin.client.post(path, json={"email": unknown}), 202)
    expect(hammered.admin.client.post(path, json={"email": unknown}), 429)


def test_one_client_address_is_throttled_across_emails_and_mail_routes(
        hammered: AppWorld) -> None:
    client, app = hammered.admin.client, hammered.name
    calls = [
        lambda: client.post(f"/{app}/auth/signup",
                            json={"email": new_email(), "password": "a long password"}),
        lambda: client.post(f"/{app}/auth/verify/resend", json={"email": new_email()}),
        lambda: client.post(f"/{app}/auth/password/forgot", json={"email": new_email()}),
        lambda: client.post(f"/{app}/auth/verify", json={"token": "x" * 43}),
        lambda: client.post(f"/{app}/auth/password/reset",
                            json={"token": "x" * 43, "password": "a long password"}),
    ]
    statuses = [calls[i % len(calls)]().status_code for i in range(6)]
    assert 429 not in statuses
    over = calls[0]()
    expect(over, 429, "TOO_MANY_REQUESTS")
    assert "Retry-After" in over.headers
