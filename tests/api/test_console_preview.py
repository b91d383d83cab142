"""Policy preview (dry run, contract section 2a): `POST /admin/apps/{app}/roles/{role}/preview`.

Callers: the operator drafting role changes for a chosen member; then that member over REST,
after the draft is saved, whose real answer the preview must have predicted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.console_world import READ, Shop, build_shop, error
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@dataclass
class Desk:
    """A north member holding `viewer` (drafts hidden, amount redacted), and invoices in
    every status of both orgs."""

    shop: Shop
    user: dict[str, Any]
    member: Caller
    by_status: dict[str, list[str]]

    def preview(self, draft: dict[str, Any], role: str = "viewer", **extra: Any) -> Any:
        body = {"draft": draft, "user": self.user["uid"], "org": self.shop.north,
                "table": "invoices", **extra}
        return self.shop.admin.post(f"{self.shop.base}/roles/{role}/preview", json=body)

    def save(self, draft: dict[str, Any], role: str = "viewer") -> None:
        expect(self.shop.admin.put(f"{self.shop.base}/roles/{role}", json=draft), 200)

    def seen(self) -> list[dict[str, Any]]:
        return self.shop.member_list(self.member, order="uid")


@pytest.fixture
def desk(world: AppWorld) -> Desk:
    shop = build_shop(world)
    by_status: dict[str, list[str]] = {}
    for status in ("received", "received", "draft", "paid", "draft", "paid", "paid"):
        row = shop.invoice(status=status, amount="1.00")
        by_status.setdefault(status, []).append(row["uid"])
    shop.invoice(shop.south_clerk, status="paid")  # another org's row is never counted
    user = shop.member(shop.north, ["viewer"])
    return Desk(shop, user, world.login(user, shop.north), by_status)


VIEWER = {"permissions": READ, "rowPolicies": {"invoices": {"status": {"ne": "draft"}}},
          "redact": {"invoices": ["amount"]}, "grants": []}


def assert_predicted(desk: Desk, preview: dict[str, Any], before: list[dict[str, Any]]) -> None:
    """What the member gets now matches the preview's draft side, and the change between
    `before` and now is exactly gained and lost."""
    after = desk.seen()
    now = {r["uid"] for r in after}
    then = {r["uid"] for r in before}
    assert preview["draft"]["visible"] == len(now)
    assert sorted(now - then) == sorted(preview["gained"])
    assert sorted(then - now) == sorted(preview["lost"])
    redacted = {k for r in after for k, v in r.items() if v == "[redacted]"}
    assert redacted == set(preview["draft"]["redacted"]) if after else True


# -- what it answers, and that the answer comes true ----------------------------------------------

def test_preview_of_the_saved_role_changes_nothing(desk: Desk) -> None:
    body = expect(desk.preview(VIEWER), 200)
    seen = desk.seen()
    assert body["saved"] == body["draft"] == {
        "visible": len(seen), "redacted": ["amount"], "actions": ["read_list", "read"]}
    assert body["gained"] == body["lost"] == []
    assert body["redactedNow"] == body["revealedNow"] == []
    assert body["actionsGranted"] == body["actionsRevoked"] == []
    assert body["roleSaved"] is True and body["roleHeld"] is True


def test_preview_of_a_narrower_policy_lists_lost_rows_and_saving_it_makes_them_vanish(
        desk: Desk) -> None:
    draft = {**VIEWER, "rowPolicies": {"invoices": {"status": "paid"}}}
    before = desk.seen()
    body = expect(desk.preview(draft), 200)
    assert sorted(body["lost"]) == sorted(desk.by_status["received"])
    assert body["gained"] == [] and body["saved"]["visible"] == len(before) == 5
    assert body["draft"]["visible"] == 3
    assert desk.seen() == before  # nothing saved by the preview
    desk.save(draft)
    assert_predicted(desk, body, before)


def test_preview_of_a_wider_role_lists_gained_rows_revealed_columns_and_granted_actions(
        desk: Desk) -> None:
    draft = {"permissions": ["invoices:*"], "rowPolicies": {}, "redact": {"invoices": ["note"]}}
    before = desk.seen()
    body = expect(desk.preview(draft), 200)
    assert sorted(body["gained"]) == sorted(desk.by_status["draft"])
    assert body["lost"] == []
    assert body["revealedNow"] == ["amount"] and body["redactedNow"] == ["note"]
    assert body["actionsGranted"] == ["create", "update", "delete"]
    assert body["actionsRevoked"] == []
    assert body["draft"]["actions"] == ["read_list", "read", "create", "update", "delete"]
    desk.save(draft)
    assert_predicted(desk, body, before)
    expect(desk.member.post(desk.shop.world.rows("invoices"), json={"number": "NEW"}), 201)


def test_preview_of_a_role_without_read_revokes_and_redacts_everything(desk: Desk) -> None:
    draft = {"permissions": ["invoices:create"]}
    body = expect(desk.preview(draft), 200)
    assert body["draft"]["visible"] == 0 and body["actionsGranted"] == ["create"]
    assert body["actionsRevoked"] == ["read_list", "read"]
    assert body["redactedNow"] == ["note", "number", "status", "vendor"]
    assert sorted(body["lost"]) == sorted(u for s in ("received", "paid")
                                          for u in desk.by_status[s])
    desk.save(draft)
    error(desk.member.get(desk.shop.world.rows("invoices")), 403, "FORBIDDEN")


def test_preview_counts_the_members_other_roles(desk: Desk) -> None:
    desk.shop.world.role("all_reader", READ)  # every row, nothing redacted
    desk.shop.world.member(desk.shop.north, desk.user["uid"], ["viewer", "all_reader"])
    before = desk.seen()
    draft = {**VIEWER, "rowPolicies": {"invoices": {"status": "paid"}}}
    body = expect(desk.preview(draft), 200)
    assert body["lost"] == [] and body["draft"]["visible"] == body["saved"]["visible"] == 7
    assert body["saved"]["redacted"] == [] == body["draft"]["redacted"]
    desk.save(draft)
    assert_predicted(desk, body, before)


def test_preview_uses_principal_values_of_the_chosen_member(desk: Desk) -> None:
    draft = {**VIEWER, "rowPolicies": {"invoices": {"note": {"eq": {"$principal": "email"}}}}}
    mine = desk.shop.invoice(note=desk.user["email"])
    before = desk.seen()
    body = expect(desk.preview(draft), 200)
    assert body["draft"]["visible"] == 1
    assert mine["uid"] not in body["lost"] and len(body["lost"]) == len(before) - 1
    desk.save(draft)
    assert_predicted(desk, body, before)


def test_preview_of_a_role_not_saved_yet_answers_404(desk: Desk) -> None:
    draft = {"permissions": ["invoices:read_list", "invoices:read"],
             "rowPolicies": {"invoices": {"status": "draft"}}}
    error(desk.preview(draft, role="drafts_only"), 404, "NOT_FOUND")
    error(desk.shop.admin.get(f"{desk.shop.base}/roles/drafts_only"), 404, "NOT_FOUND")
    desk.save(draft, role="drafts_only")
    assert expect(desk.preview(draft, role="drafts_only"), 200)["roleSaved"] is True


def test_preview_for_a_member_without_any_role_of_the_table_shows_the_whole_grant(
        desk: Desk) -> None:
    stranger = desk.shop.member(desk.shop.north, [])
    body = expect(desk.shop.admin.post(f"{desk.shop.base}/roles/viewer/preview", json={
        "draft": VIEWER, "user": stranger["uid"], "org": desk.shop.north, "table": "invoices"}),
        200)
    assert body["roleHeld"] is False
    assert body["saved"] == body["draft"] and body["saved"]["visible"] == 5


def test_preview_lists_at_most_limit_uids_but_counts_every_row(desk: Desk) -> None:
    body = expect(desk.preview({"permissions": []}, limit=2), 200)
    assert len(body["lost"]) == 2 and body["saved"]["visible"] == 5
    assert body["lost"] == sorted(body["lost"])


# -- bad input, and nothing saved ---------------------------------------------------------------

@pytest.mark.parametrize("draft", [
    {"permissions": ["invoices:fly"]},
    {"permissions": "invoices:*"},
    {"permissions": [], "unknown": 1},
    {"rowPolicies": {"invoices": {"nosuch": "x"}}},
    {"rowPolicies": {"invoices": {"status": {"near": "x"}}}},
    {"redact": {"invoices": ["nosuch"]}},
    "not a role",
])
def test_operator_gets_422_for_a_draft_that_put_would_refuse_and_nothing_is_saved(
        desk: Desk, draft: Any) -> None:
    error(desk.preview(draft), 422, "VALIDATION_FAILED")
    if isinstance(draft, dict):
        error(desk.shop.admin.put(f"{desk.shop.base}/roles/viewer", json=draft), 422,
              "VALIDATION_FAILED")
    assert expect(desk.shop.admin.get(f"{desk.shop.base}/roles/viewer"), 200) == {
        "name": "viewer", **VIEWER}


@pytest.mark.parametrize("extra", [{"limit": 0}, {"limit": 1001}, {"limit": "5"},
                                   {"user": None}, {"table": 3}, {"bogus": 1}])
def test_operator_gets_422_for_a_malformed_preview_request(desk: Desk, extra: dict[str, Any]) -> None:
    error(desk.preview(VIEWER, **extra), 422, "VALIDATION_FAILED")


def test_operator_gets_422_for_a_role_name_outside_the_pattern(desk: Desk) -> None:
    error(desk.preview(VIEWER, role="Not-A-Name"), 422, "VALIDATION_FAILED")


def test_operator_gets_404_for_an_unknown_table_or_a_non_member(desk: Desk) -> None:
    error(desk.preview(VIEWER, table="nosuch"), 404, "NOT_FOUND")
    error(desk.preview(VIEWER, org=desk.shop.south), 404, "NOT_FOUND")
    error(desk.preview(VIEWER, user="not-a-uid"), 404, "NOT_FOUND")
    error(desk.shop.admin.post("/admin/apps/nosuchapp/roles/viewer/preview", json={
        "draft": VIEWER, "user": desk.user["uid"], "org": desk.shop.north,
        "table": "invoices"}), 404, "NOT_FOUND")


def test_preview_is_not_an_audited_change(desk: Desk) -> None:
    before = desk.shop.audit()
    expect(desk.preview({"permissions": []}), 200)
    assert desk.shop.audit() == before
