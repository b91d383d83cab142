"""Sign-up, verification and account tokens (contract section 3).

Callers: people signing themselves up (verification required or off, sign-up open or closed),
holders of verify links (fresh, used, unknown), and account tokens (no org) on account and
table routes."""

from __future__ import annotations

import httpx
import pytest

from tests.accounts import (
    account_caller,
    mails_to,
    new_email,
    open_sign_up,
    signed_up,
    token_in,
    without_request_id,
)
from tests.scenario import AppWorld, Caller, expect


def _sign_up(world: AppWorld, email: str, password: str = "a long password") -> httpx.Response:
    return world.admin.client.post(f"/{world.name}/auth/signup",
                                   json={"email": email, "password": password})


def test_a_stranger_cannot_sign_up_while_sign_up_is_closed(world: AppWorld) -> None:
    body = expect(_sign_up(world, new_email()), 403, "FORBIDDEN")
    assert body["error"]["details"]["reason"] == "sign_up_closed"


def test_a_person_signing_up_gets_a_verify_mail_whose_link_verifies_them(world: AppWorld) -> None:
    open_sign_up(world)
    email = new_email()
    assert expect(_sign_up(world, email), 202) == {"status": "verification_sent"}
    [mail] = mails_to(world, email)
    assert world.name in mail["subject"] and mail["status"] == "mailbox"
    assert f"/{world.name}/auth/pages/verify#token=" in mail["text"]
    login = {"email": email, "password": "a long password"}
    refused = expect(world.admin.client.post(f"/{world.name}/auth/token", json=login), 403)
    assert refused["error"]["details"]["reason"] == "email_not_verified"
    token = token_in(mail)
    assert expect(world.admin.client.post(f"/{world.name}/auth/verify", json={"token": token}),
                  200) == {"verified": True}
    pair = expect(world.admin.client.post(f"/{world.name}/auth/token", json=login), 200)
    assert pair["token_type"] == "Bearer"


def test_a_verify_link_works_once_and_a_made_up_one_never(world: AppWorld) -> None:
    open_sign_up(world)
    email = new_email()
    expect(_sign_up(world, email), 202)
    token = token_in(mails_to(world, email)[0])
    verify = f"/{world.name}/auth/verify"
    expect(world.admin.client.post(verify, json={"token": token}), 200)
    used = expect(world.admin.client.post(verify, json={"token": token}), 400, "BAD_REQUEST")
    made_up = expect(world.admin.client.post(verify, json={"token": "x" * 43}), 400)
    assert without_request_id(used) == without_request_id(made_up)
    assert used["error"]["details"]["reason"] == "invalid_token"


def test_signing_up_with_a_taken_email_answers_the_same_and_mails_the_owner(
        world: AppWorld) -> None:
    open_sign_up(world)
    email = new_email()
    first = _sign_up(world, email)
    again = _sign_up(world, email, "another long one")
    assert (first.status_code, first.json()) == (again.status_code, again.json())
    subjects = [m["subject"] for m in mails_to(world, email)]
    assert len(subjects) == 2 and "Your" in subjects[0] and "Confirm" in subjects[1]


def test_with_verification_off_sign_up_gives_an_account_token_and_a_taken_email_409(
        world: AppWorld) -> None:
    open_sign_up(world, emailVerification="off")
    email = new_email()
    pair = expect(_sign_up(world, email), 201)
    assert set(pair) == {"access_token", "refresh_token", "token_type", "expires_in"}
    expect(_sign_up(world, email), 409, "CONFLICT")
    assert mails_to(world, email) == []
    me = expect(Caller(world.admin.client, pair["access_token"]).get(f"/{world.name}/auth/me"),
                200)
    assert me["user"]["email"] == email and me["user"]["emailVerified"] is False
    assert me["org"] is None and me["memberships"] == [] and me["invitations"] == []


def test_a_password_too_short_for_the_app_or_over_1024_bytes_is_refused(world: AppWorld) -> None:
    open_sign_up(world, passwordMinLength=12)
    expect(_sign_up(world, new_email(), "eleven char"), 422, "VALIDATION_FAILED")
    expect(_sign_up(world, new_email(), "é" * 513), 422, "VALIDATION_FAILED")
    expect(_sign_up(world, new_email(), "twelve chars"), 202)


def test_an_account_token_is_refused_by_table_routes_with_no_org(world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}])
    open_sign_up(world)
    caller = account_caller(world, signed_up(world))
    refused = expect(caller.get(world.rows("notes")), 403, "FORBIDDEN")
    assert refused["error"]["details"]["reason"] == "no_org"
    refused = expect(caller.post(world.rows("notes"), json={"body": "x"}), 403, "FORBIDDEN")
    assert refused["error"]["details"]["reason"] == "no_org"
    stream = caller.get(f"{world.rows('notes')}/subscribe",
                        headers={"Accept": "text/event-stream"})
    assert stream.status_code == 403 and stream.json()["error"]["details"]["reason"] == "no_org"


def test_an_account_token_refreshes_into_another_account_token(world: AppWorld) -> None:
    open_sign_up(world)
    caller = account_caller(world, signed_up(world))
    pair = expect(world.admin.client.post(f"/{world.name}/auth/refresh",
                                          json={"refresh_token": caller.refresh_token}), 200)
    me = expect(Caller(world.admin.client, pair["access_token"]).get(f"/{world.name}/auth/me"),
                200)
    assert me["org"] is None and me["user"]["emailVerified"] is True


def test_a_user_creates_an_org_and_owns_it_when_the_app_lets_users(world: AppWorld) -> None:
    world.role("owner", ["*:*"])
    open_sign_up(world)
    caller = account_caller(world, signed_up(world))
    closed = expect(caller.post(f"/{world.name}/orgs", json={"name": "Acme"}), 403)
    assert closed["error"]["details"]["reason"] == "org_creation_closed"
    expect(world.admin.patch(world.base, json={"settings": {
        "orgCreation": "users", "orgOwnerRoles": ["owner"]}}), 200)
    made = expect(caller.post(f"/{world.name}/orgs", json={"name": "Acme"}), 201)
    assert made["org"]["name"] == "Acme"
    owner = Caller(world.admin.client, made["access_token"])
    me = expect(owner.get(f"/{world.name}/auth/me"), 200)
    assert me["org"] == made["org"]["uid"] and me["roles"] == ["owner"]
    assert me["memberships"] == [{"org": made["org"]["uid"], "orgName": "Acme",
                                  "roles": ["owner"]}]
    audit = expect(world.admin.get(f"{world.base}/audit"), 200)["items"]
    assert audit[0]["action"] == "org.create"
    assert audit[0]["actor"] == {"kind": "member", "user": me["user"]["uid"],
                                 "org": made["org"]["uid"]}
    assert "actor" not in audit[0]["details"]  # the entry's own actor says who


def test_users_creating_orgs_learn_nothing_of_other_tenants_org_names(world: AppWorld) -> None:
    """An org's name is its label, not a key: a user naming an org as another tenant named
    theirs gets an org of their own (a 409 would tell them that tenant exists, and let anyone
    squat names). The operator, who sees every org, still gets 409 for a name in use."""
    world.role("owner", ["*:*"])
    expect(world.admin.patch(world.base, json={"settings": {
        "orgCreation": "users", "orgOwnerRoles": ["owner"]}}), 200)
    first, second = (world.login(world.user()) for _ in range(2))
    mine = expect(first.post(f"/{world.name}/orgs", json={"name": "Acme"}), 201)["org"]
    theirs = expect(second.post(f"/{world.name}/orgs", json={"name": "Acme"}), 201)["org"]
    assert mine["uid"] != theirs["uid"] and mine["name"] == theirs["name"] == "Acme"
    expect(world.admin.post(f"{world.base}/orgs", json={"name": "Acme"}), 409, "CONFLICT")
    listed = expect(world.admin.get(f"{world.base}/orgs"), 200)["items"]
    assert sorted(o["uid"] for o in listed) == sorted([mine["uid"], theirs["uid"]])


def test_operator_created_users_are_verified(world: AppWorld) -> None:
    user = world.user()
    users = expect(world.admin.get(f"{world.base}/users"), 200)["items"]
    assert [u["emailVerified"] for u in users if u["uid"] == user["uid"]] == [True]


NOT_ONE_ADDRESS = ["a,victim@corp.test", "a@corp.test,victim@corp.test", "a;victim@corp.test",
                   "Ann <victim@corp.test>", "<victim@corp.test>", '"a,b"@corp.test',
                   "a(comment)@corp.test", "a b@corp.test", "a@corp.test\r\nBcc: victim@corp.test",
                   "a@[127.0.0.1]", "a\\b@corp.test", "no-at-sign", "a@-corp.test"]


@pytest.mark.parametrize("address", NOT_ONE_ADDRESS)
def test_every_route_that_takes_an_email_refuses_anything_but_one_address(
        world: AppWorld, address: str) -> None:
    """A value a mail composer could read as several recipients, a display name or a header
    is refused with 422 wherever an address enters: sign-up, resend, forgot, a member's and
    the operator's invitations, and the operator's new user. No mail is queued."""
    open_sign_up(world)
    expect(world.admin.put(f"{world.base}/roles/lead", json={
        "permissions": ["org.members:*"], "grants": ["lead"]}), 200)
    org = world.org("Acme")
    lead = world.caller(org, ["lead"])
    client, app = world.admin.client, world.name
    calls = [
        client.post(f"/{app}/auth/signup", json={"email": address, "password": "a long password"}),
        client.post(f"/{app}/auth/verify/resend", json={"email": address}),
        client.post(f"/{app}/auth/password/forgot", json={"email": address}),
        lead.post(f"/{app}/org/invitations", json={"email": address, "roles": []}),
        world.admin.post(f"{world.base}/orgs/{org}/invitations",
                         json={"email": address, "roles": []}),
        world.admin.post(f"{world.base}/users", json={"email": address, "password": "long enough"}),
    ]
    for answer in calls:
        expect(answer, 422, "VALIDATION_FAILED")
    assert expect(world.admin.get(f"{world.base}/mail"), 200)["items"] == []


def test_an_address_is_kept_trimmed_and_in_lower_case(world: AppWorld) -> None:
    open_sign_up(world)
    email = new_email()
    expect(_sign_up(world, f"  {email.upper()} "), 202)
    assert [m["to"] for m in mails_to(world, email)] == [email]
