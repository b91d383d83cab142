"""Invitations (section 3a): a lead invites within their grants, the mail carries the link,
the invitee accepts once (a new account, or an existing one proving itself), and lands in the
org with the invitation's roles, whatever the app's `signUp`.

Callers: an owner, a lead (who may hand out `clerk`), a clerk without member permissions, the
invitee (new, or with an account already), and the operator; the app's mailbox is read as
the operator.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.accounts import mails_to, new_email, signed_up, token_in
from tests.scenario import AppWorld, Caller, expect


@pytest.fixture
def org(world: AppWorld) -> dict[str, Any]:
    world.table("notes", [{"name": "text", "type": "text"}])
    for name, permissions, grants in (("owner", ["*:*"], ["owner", "lead", "clerk"]),
                                      ("lead", ["notes:*", "org.members:*"], ["clerk"]),
                                      ("clerk", ["notes:*"], [])):
        expect(world.admin.put(f"{world.base}/roles/{name}", json={
            "permissions": permissions, "grants": grants}), 200)
    uid = world.org("Acme")
    return {"uid": uid, "owner": world.caller(uid, ["owner"]),
            "lead": world.caller(uid, ["lead"]), "clerk": world.caller(uid, ["clerk"])}


def path(world: AppWorld, rest: str = "") -> str:
    return f"/{world.name}/org/invitations" + (f"/{rest}" if rest else "")


def accept(world: AppWorld, body: dict[str, Any], token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return world.admin.client.post(f"/{world.name}/auth/invitations/accept", json=body,
                                   headers=headers)


def test_a_lead_invites_a_clerk_who_joins_with_a_new_account(world: AppWorld,
                                                            org: dict[str, Any]) -> None:
    email = new_email()
    sent = expect(org["lead"].post(path(world), json={"email": email.upper(), "roles": ["clerk"]}),
                  201)
    assert {k: sent[k] for k in ("email", "roles", "invitedBy")} == {
        "email": email, "roles": ["clerk"], "invitedBy": org["lead"].user_uid}
    assert sent["uid"] and sent["expiresAt"].endswith("Z")
    [mail] = mails_to(world, email)
    assert "Acme" in mail["text"] and f"/{world.name}/auth/pages/invite#token=" in mail["text"]
    listed = expect(org["lead"].get(path(world)), 200)["items"]
    assert [i["uid"] for i in listed] == [sent["uid"]]
    assert [i["uid"] for i in expect(world.admin.get(
        f"{world.base}/orgs/{org['uid']}/invitations"), 200)["items"]] == [sent["uid"]]

    pair = expect(accept(world, {"token": token_in(mail), "password": "a long password"}), 200)
    joined = Caller(world.admin.client, pair["access_token"], pair["refresh_token"])
    expect(joined.post(world.rows("notes"), json={"text": "hello"}), 201)
    me = expect(joined.get(f"/{world.name}/auth/me"), 200)
    assert (me["org"], me["roles"], me["user"]["emailVerified"]) == (org["uid"], ["clerk"], True)
    members = {m["email"]: m["roles"] for m in expect(org["lead"].get(
        f"/{world.name}/org/members"), 200)["items"]}
    assert members[email] == ["clerk"]
    # Used once: the same link again, and the list, show it gone.
    again = expect(accept(world, {"token": token_in(mail), "password": "a long password"}), 400)
    assert again["error"]["details"]["reason"] == "invalid_token"
    assert expect(org["lead"].get(path(world)), 200)["items"] == []


def test_an_invitation_with_a_role_outside_the_inviters_grants_is_refused(
        world: AppWorld, org: dict[str, Any]) -> None:
    email = new_email()
    refused = expect(org["lead"].post(path(world), json={"email": email, "roles": ["lead"]}),
                     403, "FORBIDDEN")
    assert refused["error"]["details"]["reason"] == "role_not_grantable"
    expect(org["clerk"].post(path(world), json={"email": email, "roles": []}), 403, "FORBIDDEN")
    expect(org["lead"].post(path(world), json={"email": email, "roles": ["ghost"]}), 403)
    expect(world.admin.post(f"{world.base}/orgs/{org['uid']}/invitations",
                            json={"email": email, "roles": ["ghost"]}), 422, "VALIDATION_FAILED")
    assert mails_to(world, email) == []
    assert expect(world.admin.get(f"{world.base}/orgs/{org['uid']}/invitations"), 200)["items"] == []


def test_inviting_a_current_member_is_a_conflict(world: AppWorld, org: dict[str, Any]) -> None:
    member = world.user()
    world.member(org["uid"], member["uid"], ["clerk"])
    expect(org["lead"].post(path(world), json={"email": member["email"], "roles": ["clerk"]}),
           409, "CONFLICT")


def test_an_existing_account_accepts_with_its_password_or_its_bearer_and_not_otherwise(
        world: AppWorld, org: dict[str, Any]) -> None:
    person = world.user()
    expect(org["owner"].post(path(world), json={"email": person["email"], "roles": ["clerk"]}), 201)
    token = token_in(mails_to(world, person["email"])[0])
    expect(accept(world, {"token": token}), 401, "UNAUTHENTICATED")
    expect(accept(world, {"token": token, "password": "not the password"}), 401)
    stranger = world.caller(world.org("Other"), ["clerk"])
    expect(accept(world, {"token": token}, stranger.token), 401)
    # Still unspent after the refusals: the account's own bearer (an account token: no
    # membership yet) accepts it.
    signed_in = world.login(person)
    pair = expect(accept(world, {"token": token}, signed_in.token), 200)
    me = expect(Caller(world.admin.client, pair["access_token"]).get(f"/{world.name}/auth/me"), 200)
    assert (me["user"]["uid"], me["org"], me["roles"]) == (person["uid"], org["uid"], ["clerk"])

    other = world.user()
    expect(org["owner"].post(path(world), json={"email": other["email"], "roles": ["clerk"]}), 201)
    expect(accept(world, {"token": token_in(mails_to(world, other["email"])[0]),
                          "password": other["password"]}), 200)


def test_a_bearer_that_no_longer_signs_in_the_invited_account_does_not_accept_for_it(
        world: AppWorld, org: dict[str, Any]) -> None:
    """Signed but dead: an account token whose session was signed out, an org token whose
    membership the operator removed, and the operator's view-as token; none proves the
    account, and the invitation stays unspent for its live bearer."""
    person = world.user()
    expect(org["owner"].post(path(world), json={"email": person["email"], "roles": ["clerk"]}), 201)
    token = token_in(mails_to(world, person["email"])[0])

    signed_out = world.login(person)
    expect(world.admin.client.post(f"/{world.name}/auth/logout",
                                   json={"refresh_token": signed_out.refresh_token}), 204)
    expect(accept(world, {"token": token}, signed_out.token), 401, "UNAUTHENTICATED")

    other = world.org("Other")
    world.member(other, person["uid"], ["clerk"])
    removed = world.login(person, other)
    expect(world.admin.delete(f"{world.base}/orgs/{other}/members/{person['uid']}"), 204)
    expect(accept(world, {"token": token}, removed.token), 401, "UNAUTHENTICATED")

    world.member(other, person["uid"], ["clerk"])
    view_as = expect(world.admin.post(f"{world.base}/impersonate", json={
        "user": person["uid"], "org": other}), 200)["access_token"]
    refused = expect(accept(world, {"token": token}, view_as), 403, "FORBIDDEN")
    assert refused["error"]["details"]["reason"] == "impersonation_read_only"

    pair = expect(accept(world, {"token": token}, world.login(person, other).token), 200)
    me = expect(Caller(world.admin.client, pair["access_token"]).get(f"/{world.name}/auth/me"), 200)
    assert (me["user"]["uid"], me["org"], me["roles"]) == (person["uid"], org["uid"], ["clerk"])


def test_a_resent_invitation_replaces_the_old_link_and_a_revoked_one_opens_nothing(
        world: AppWorld, org: dict[str, Any]) -> None:
    email = new_email()
    first = expect(org["lead"].post(path(world), json={"email": email, "roles": ["clerk"]}), 201)
    second = expect(org["lead"].post(path(world), json={"email": email, "roles": ["clerk"]}), 201)
    old, new = (token_in(m) for m in reversed(mails_to(world, email)))
    assert [i["uid"] for i in expect(org["lead"].get(path(world)), 200)["items"]] == [second["uid"]]
    expect(accept(world, {"token": old, "password": "a long password"}), 400, "BAD_REQUEST")
    expect(org["lead"].delete(path(world, first["uid"])), 404)
    expect(org["lead"].delete(path(world, second["uid"])), 204)
    bad = expect(accept(world, {"token": new, "password": "a long password"}), 400)
    assert bad["error"]["details"]["reason"] == "invalid_token"
    expect(accept(world, {"token": "x" * 43, "password": "a long password"}), 400)


def test_a_lead_cannot_revoke_an_invitation_beyond_their_grants(world: AppWorld,
                                                                org: dict[str, Any]) -> None:
    sent = expect(org["owner"].post(path(world), json={"email": new_email(), "roles": ["lead"]}),
                  201)
    refused = expect(org["lead"].delete(path(world, sent["uid"])), 403, "FORBIDDEN")
    assert refused["error"]["details"]["reason"] == "role_not_grantable"
    other = world.org("Other")
    theirs = expect(world.admin.post(f"{world.base}/orgs/{other}/invitations",
                                     json={"email": new_email(), "roles": ["clerk"]}), 201)
    expect(org["owner"].delete(path(world, theirs["uid"])), 404, "NOT_FOUND")


def test_a_lead_cannot_replace_an_owners_invitation_beyond_their_grants_by_inviting_again(
        world: AppWorld, org: dict[str, Any]) -> None:
    email = new_email()
    sent = expect(org["owner"].post(path(world), json={"email": email, "roles": ["lead"]}), 201)
    for roles in (["clerk"], []):
        refused = expect(org["lead"].post(path(world), json={"email": email, "roles": roles}),
                         403, "FORBIDDEN")
        assert refused["error"]["details"] == {**refused["error"]["details"],
                                               "reason": "role_not_grantable", "roles": ["lead"]}
    listed = expect(org["owner"].get(path(world)), 200)["items"]
    assert [(i["uid"], i["roles"]) for i in listed] == [(sent["uid"], ["lead"])]
    [mail] = mails_to(world, email)  # the refused ones sent nothing
    pair = expect(accept(world, {"token": token_in(mail), "password": "a long password"}), 200)
    me = expect(Caller(world.admin.client, pair["access_token"]).get(f"/{world.name}/auth/me"), 200)
    assert me["roles"] == ["lead"]


def test_a_lead_resends_their_own_invitation_and_the_owner_replaces_a_leads_one(
        world: AppWorld, org: dict[str, Any]) -> None:
    email = new_email()
    expect(org["lead"].post(path(world), json={"email": email, "roles": ["clerk"]}), 201)
    expect(org["lead"].post(path(world), json={"email": email, "roles": ["clerk"]}), 201)
    upgraded = expect(org["owner"].post(path(world), json={"email": email, "roles": ["lead"]}),
                      201)
    listed = expect(org["owner"].get(path(world)), 200)["items"]
    assert [(i["uid"], i["roles"], i["invitedBy"]) for i in listed] == [
        (upgraded["uid"], ["lead"], org["owner"].user_uid)]
    assert len(mails_to(world, email)) == 3


@pytest.mark.parametrize("sign_up", ["closed", "invite", "open"])
def test_an_invitation_works_whatever_sign_up_is(world: AppWorld, org: dict[str, Any],
                                                 sign_up: str) -> None:
    expect(world.admin.patch(world.base, json={"settings": {"signUp": sign_up}}), 200)
    email = new_email()
    expect(org["lead"].post(path(world), json={"email": email, "roles": ["clerk"]}), 201)
    expect(accept(world, {"token": token_in(mails_to(world, email)[0]),
                          "password": "a long password"}), 200)


def test_me_lists_pending_invitations_for_a_verified_email_only(world: AppWorld,
                                                                org: dict[str, Any]) -> None:
    expect(world.admin.patch(world.base, json={"settings": {"signUp": "open"}}), 200)
    person = signed_up(world)
    sent = expect(org["lead"].post(path(world), json={"email": person["email"],
                                                       "roles": ["clerk"]}), 201)
    pair = expect(world.admin.client.post(f"/{world.name}/auth/token", json=person), 200)
    me = expect(Caller(world.admin.client, pair["access_token"]).get(f"/{world.name}/auth/me"), 200)
    assert me["invitations"] == [{"uid": sent["uid"], "org": org["uid"], "orgName": "Acme",
                                  "roles": ["clerk"], "expiresAt": sent["expiresAt"]}]


def test_every_invitation_change_is_audited_with_its_actor(world: AppWorld,
                                                          org: dict[str, Any]) -> None:
    email = new_email()
    sent = expect(org["lead"].post(path(world), json={"email": email, "roles": ["clerk"]}), 201)
    expect(org["lead"].delete(path(world, sent["uid"])), 204)
    expect(world.admin.post(f"{world.base}/orgs/{org['uid']}/invitations",
                            json={"email": email, "roles": ["clerk"]}), 201)
    pair = expect(accept(world, {"token": token_in(mails_to(world, email)[0]),
                                 "password": "a long password"}), 200)
    assert pair["access_token"]
    entries = expect(world.admin.get(f"{world.base}/audit"), 200)["items"]
    actions = [(e["action"], e["actor"]["kind"]) for e in entries[:4]]
    assert actions == [("invitation.accept", "member"), ("invitation.create", "operator"),
                       ("invitation.delete", "member"), ("invitation.create", "member")]
    for mail in mails_to(world, email):
        assert token_in(mail) not in str(entries)
