"""Impersonation ("view as", contract section 2a): `POST /admin/apps/{app}/impersonate`.

Callers: the operator minting tokens; the holder of such a token reading, subscribing, and
trying every write, refresh and logout; the member themself, whose own token is the measure
of what the impersonation token must show.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.console_world import Shop, build_shop, claims, error
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess
from tests.sse import SSEClient


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@dataclass
class ViewAs:
    """A north viewer (drafts hidden, amount redacted), their own token, and rows to see."""

    shop: Shop
    user: dict[str, Any]
    own: Caller
    visible: dict[str, Any]
    draft: dict[str, Any]


@pytest.fixture
def view(world: AppWorld) -> ViewAs:
    shop = build_shop(world)
    user = shop.member(shop.north, ["viewer"])
    visible = shop.invoice(amount="10.00")
    draft = shop.invoice(status="draft", amount="20.00")
    shop.invoice(shop.south_clerk, amount="30.00")
    return ViewAs(shop, user, world.login(user, shop.north), visible, draft)


def _rows(shop: Shop) -> str:
    return shop.world.rows("invoices")


# -- reading as the member --------------------------------------------------------------------

def test_impersonation_token_lists_exactly_what_the_members_own_token_lists(view: ViewAs) -> None:
    as_member = view.shop.impersonate(view.user, view.shop.north)
    seen = view.shop.member_list(as_member)
    assert seen == view.shop.member_list(view.own)
    assert [r["uid"] for r in seen] == [view.visible["uid"]]  # the draft and South's row absent
    assert seen[0]["amount"] == "[redacted]"


def test_impersonation_token_gets_404_for_a_row_the_member_cannot_see(view: ViewAs) -> None:
    as_member = view.shop.impersonate(view.user, view.shop.north)
    error(as_member.get(f"{_rows(view.shop)}/{view.draft['uid']}"), 404, "NOT_FOUND")
    row = expect(as_member.get(f"{_rows(view.shop)}/{view.visible['uid']}"), 200)
    assert row == expect(view.own.get(f"{_rows(view.shop)}/{view.visible['uid']}"), 200)


def test_impersonation_token_follows_a_role_change_on_the_next_request(view: ViewAs) -> None:
    as_member = view.shop.impersonate(view.user, view.shop.north)
    view.shop.world.member(view.shop.north, view.user["uid"], ["clerk"])
    uids = {r["uid"] for r in view.shop.member_list(as_member)}
    assert uids == {view.visible["uid"], view.draft["uid"]}
    expect(view.shop.admin.delete(
        f"{view.shop.base}/orgs/{view.shop.north}/members/{view.user['uid']}"), 204)
    error(as_member.get(_rows(view.shop)), 401, "UNAUTHENTICATED")


def test_impersonation_token_subscribes_and_hears_what_the_member_hears(view: ViewAs) -> None:
    shop = view.shop
    as_member = shop.impersonate(view.user, shop.north)
    path = f"{_rows(shop)}/subscribe"
    with SSEClient(shop.world.server.url, path, as_member.token) as imp, \
            SSEClient(shop.world.server.url, path, view.own.token) as own:
        assert imp.status_code == own.status_code == 200, (imp.body, own.body)
        imp.wait_connected()
        own.wait_connected()
        hidden = shop.invoice(status="draft")
        shop.invoice(shop.south_clerk)
        fence = shop.invoice(amount="1.00")
        got = imp.wait_for_change(fence["uid"], "insert")
        own.wait_for_change(fence["uid"], "insert")
        assert got.data["row"]["amount"] == "[redacted]"
        assert [f.raw for f in imp.changes()] == [f.raw for f in own.changes()]
        assert hidden["uid"] not in {f.row_uid for f in imp.changes()}


# -- never writing --------------------------------------------------------------------------------

def test_impersonation_of_a_clerk_cannot_write_by_any_route(view: ViewAs) -> None:
    shop = view.shop
    clerk = shop.member(shop.north, ["clerk"])
    as_clerk = shop.impersonate(clerk, shop.north)
    uid = view.visible["uid"]
    attempts = [
        as_clerk.post(_rows(shop), json={"number": "IMP-1"}),
        as_clerk.patch(f"{_rows(shop)}/{uid}", json={"note": "x"}),
        as_clerk.delete(f"{_rows(shop)}/{uid}"),
        as_clerk.patch(_rows(shop), params={"status": "received"}, json={"set": {"note": "x"}}),
        as_clerk.delete(_rows(shop), params={"status": "received"}),
        as_clerk.post(f"{_rows(shop)}/import", content=b"number\nIMP-2\n",
                      headers={"Content-Type": "text/csv"}),
    ]
    for response in attempts:
        details = error(response, 403, "FORBIDDEN")
        assert details["reason"] == "impersonation_read_only", response.text
    rows = shop.admin_list(order="number")
    assert {r["number"] for r in rows} == {"INV-1", "INV-2", "INV-3"}
    assert all(r["note"] is None for r in rows)


def test_impersonation_of_a_member_without_the_permission_still_says_read_only(
        view: ViewAs) -> None:
    as_member = view.shop.impersonate(view.user, view.shop.north)
    details = error(as_member.post(_rows(view.shop), json={"number": "X"}), 403, "FORBIDDEN")
    assert details["reason"] == "impersonation_read_only"


def test_impersonation_on_a_locked_table_answers_table_locked_first(view: ViewAs) -> None:
    shop = view.shop
    expect(shop.admin.patch(f"{shop.base}/tables/invoices",
                            json={"operations": {"create": False}}), 200)
    as_member = shop.impersonate(shop.member(shop.north, ["clerk"]), shop.north)
    error(as_member.post(_rows(shop), json={"number": "X"}), 403, "TABLE_LOCKED")


def test_impersonation_token_cannot_be_refreshed_or_logged_out(view: ViewAs) -> None:
    shop = view.shop
    body = expect(shop.admin.post(f"{shop.base}/impersonate",
                                  json={"user": view.user["uid"], "org": shop.north}), 200)
    assert set(body) == {"access_token", "token_type", "expires_in"}  # no refresh token
    token = body["access_token"]
    client = shop.admin.client
    for route in ("refresh", "logout"):
        error(client.post(f"/{shop.world.name}/auth/{route}", json={"refresh_token": token}), 401,
              "UNAUTHENTICATED")
    # Still a working read token afterwards (logout revoked nothing of it).
    assert shop.member_list(Caller(client, token))


def test_impersonation_token_is_refused_on_admin_routes(view: ViewAs) -> None:
    as_member = view.shop.impersonate(view.user, view.shop.north)
    error(as_member.get(f"{view.shop.base}/tables"), 401, "UNAUTHENTICATED")


# -- lifetime ----------------------------------------------------------------------------------

def test_impersonation_token_expires_within_its_ttl(view: ViewAs) -> None:
    shop = view.shop
    before = time.time()
    body = expect(shop.admin.post(f"{shop.base}/impersonate", json={
        "user": view.user["uid"], "org": shop.north, "ttl": 120}), 200)
    after = time.time()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 120
    exp = claims(body["access_token"])["exp"]
    assert before + 120 - 2 <= exp <= after + 120
    default = claims(shop.impersonate(view.user, shop.north).token)["exp"]
    assert default <= time.time() + 600
    longest = expect(shop.admin.post(f"{shop.base}/impersonate", json={
        "user": view.user["uid"], "org": shop.north, "ttl": 900}), 200)
    assert claims(longest["access_token"])["exp"] <= time.time() + 900


@pytest.mark.parametrize("ttl", [901, 3600, 0, -5, 1.5, "600", True, None])
def test_operator_gets_422_for_a_ttl_outside_1_to_900_seconds(view: ViewAs, ttl: Any) -> None:
    shop = view.shop
    before = len(shop.audit())
    details = error(shop.admin.post(f"{shop.base}/impersonate", json={
        "user": view.user["uid"], "org": shop.north, "ttl": ttl}), 422, "VALIDATION_FAILED")
    assert [e["field"] for e in details["errors"]] == ["ttl"]
    assert len(shop.audit()) == before


# -- who may be impersonated ----------------------------------------------------------------------

def test_operator_gets_404_impersonating_a_user_who_is_not_a_member_of_the_org(view: ViewAs) -> None:
    shop = view.shop
    other_app_user = AppWorld.create(shop.world.server, shop.admin.client).user()
    loner = shop.world.user()
    before = len(shop.audit())
    for user, org in [(view.user["uid"], shop.south),          # a member elsewhere only
                      (loner["uid"], shop.north),              # a member of nothing
                      (other_app_user["uid"], shop.north),     # a user of another app
                      ("0190f1b2-0000-7000-8000-000000000009", shop.north),
                      ("not-a-uid", shop.north), (view.user["uid"], "not-a-uid")]:
        error(shop.admin.post(f"{shop.base}/impersonate", json={"user": user, "org": org}), 404,
              "NOT_FOUND")
    assert len(shop.audit()) == before


@pytest.mark.parametrize("body", [{}, {"user": 1, "org": "x"}, {"org": "x"}, [], "x",
                                  {"user": "a", "org": "b", "extra": 1}])
def test_operator_gets_422_for_a_malformed_impersonation_request(view: ViewAs, body: Any) -> None:
    error(view.shop.admin.post(f"{view.shop.base}/impersonate", json=body), 422,
          "VALIDATION_FAILED")


def test_operator_gets_404_impersonating_in_an_app_that_does_not_exist(view: ViewAs) -> None:
    error(view.shop.admin.post("/admin/apps/nosuchapp/impersonate",
                               json={"user": view.user["uid"], "org": view.shop.north}), 404,
          "NOT_FOUND")


# -- audited ------------------------------------------------------------------------------------

def test_every_impersonation_is_audited_without_the_token(view: ViewAs) -> None:
    shop = view.shop
    tokens = [shop.impersonate(view.user, shop.north, ttl=60).token for _ in range(2)]
    entries = [e for e in shop.audit() if e["action"] == "impersonate"]
    assert len(entries) == 2
    newest = entries[0]
    assert newest["target"] == f"users/{view.user['uid']}"
    assert newest["details"]["user"] == view.user["uid"]
    assert newest["details"]["org"] == shop.north
    assert newest["details"]["ttl"] == 60
    everything = str(shop.audit())
    assert all(token not in everything and token.split(".")[2] not in everything
               for token in tokens)
