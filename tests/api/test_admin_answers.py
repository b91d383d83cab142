"""The answers the platform document declares for the admin routes, against what the routes
really answer: an operator (or a client generated from the document, such as the admin client's
interfaces) reading an org, a table, an index, a role, a key, an invitation, a mail, a session,
a preview or the audit log gets exactly the declared shape, every field declared and no other.

The admin routes declare their answers for documentation only (`responses=`, never filtering
what the service builds), so nothing but these checks keeps the document true: the last test
fails for a route whose answer is documented only and not checked here.
"""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema_rs
from fastapi.routing import APIRoute
from pydantic import BaseModel

from authoric.app import ROUTERS
from tests.scenario import AppWorld, expect

APP = "/admin/apps/{app}"
# The routes each test below checks, by group: (method, path as the document names it).
TENANCY = {("post", f"{APP}/orgs"), ("get", f"{APP}/orgs"), ("post", f"{APP}/users"),
           ("get", f"{APP}/users"), ("put", f"{APP}/orgs/{{org}}/members/{{user}}"),
           ("get", f"{APP}/orgs/{{org}}/members"), ("get", f"{APP}/users/{{user}}/memberships")}
TABLES = {("post", f"{APP}/tables"), ("get", f"{APP}/tables"), ("get", f"{APP}/tables/{{table}}"),
          ("patch", f"{APP}/tables/{{table}}"),
          ("put", f"{APP}/tables/{{table}}/indexes/{{name}}"),
          ("get", f"{APP}/tables/{{table}}/indexes"),
          ("get", f"{APP}/tables/{{table}}/indexes/{{name}}"),
          ("put", f"{APP}/roles/{{role}}"), ("get", f"{APP}/roles"),
          ("get", f"{APP}/roles/{{role}}")}
ACCOUNTS = {("post", f"{APP}/orgs/{{org}}/keys"), ("get", f"{APP}/orgs/{{org}}/keys"),
            ("post", f"{APP}/orgs/{{org}}/invitations"),
            ("get", f"{APP}/orgs/{{org}}/invitations"), ("get", f"{APP}/mail"),
            ("get", f"{APP}/users/{{user}}/sessions")}
CONSOLE = {("post", f"{APP}/impersonate"), ("post", f"{APP}/roles/{{role}}/preview"),
           ("get", f"{APP}/audit")}


class Answers:
    """The platform document, and the operations whose real answers were checked against it."""

    def __init__(self, http: httpx.Client) -> None:
        self.doc = expect(http.get("/openapi.json"), 200)
        self.checked: set[tuple[str, str]] = set()

    def fit(self, method: str, path: str, status: int, answer: Any) -> Any:
        """`answer`, once it fits the schema `path` declares for `status` (a named one)."""
        schema = self.doc["paths"][path][method]["responses"][str(status)]["content"][
            "application/json"]["schema"]
        assert "$ref" in schema, (method, path, schema)
        jsonschema_rs.Draft202012Validator({**schema, "components": self.doc["components"]}
                                           ).validate(answer)
        self.checked.add((method, path))
        return answer


def test_the_operators_answers_for_orgs_users_and_members_fit_the_declared_schemas(
        world: AppWorld, http: httpx.Client) -> None:
    answers, base = Answers(http), world.base
    world.role("clerk", ["*:*"])
    org = answers.fit("post", f"{APP}/orgs", 201,
                      expect(world.admin.post(f"{base}/orgs", json={"name": "North"}), 201))
    answers.fit("get", f"{APP}/orgs", 200, expect(world.admin.get(f"{base}/orgs"), 200))
    user = answers.fit("post", f"{APP}/users", 201, expect(world.admin.post(
        f"{base}/users", json={"email": "ada@north.test", "password": "correct horse"}), 201))
    answers.fit("get", f"{APP}/users", 200, expect(world.admin.get(f"{base}/users"), 200))
    answers.fit("put", f"{APP}/orgs/{{org}}/members/{{user}}", 200, expect(world.admin.put(
        f"{base}/orgs/{org['uid']}/members/{user['uid']}", json={"roles": ["clerk"]}), 200))
    members = expect(world.admin.get(f"{base}/orgs/{org['uid']}/members"), 200)
    assert [m["email"] for m in members["items"]] == ["ada@north.test"]
    answers.fit("get", f"{APP}/orgs/{{org}}/members", 200, members)
    memberships = expect(world.admin.get(f"{base}/users/{user['uid']}/memberships"), 200)
    assert memberships["items"] == [{"org": org["uid"], "orgName": "North", "roles": ["clerk"]}]
    answers.fit("get", f"{APP}/users/{{user}}/memberships", 200, memberships)
    assert answers.checked == TENANCY


def test_the_operators_answers_for_tables_indexes_and_roles_fit_the_declared_schemas(
        world: AppWorld, http: httpx.Client) -> None:
    answers, base = Answers(http), world.base
    world.table("vendors", [{"name": "name", "type": "text", "required": True, "unique": True}])
    created = answers.fit("post", f"{APP}/tables", 201, world.table("invoices", [
        {"name": "number", "type": "text"},
        {"name": "vendor", "type": "reference", "references": "vendors"},
        {"name": "status", "type": "select", "options": ["draft", "paid"], "default": "draft"},
    ]))
    assert "options" not in created["columns"][0] and "indexes" not in created
    org = world.org("North")
    for _ in range(2):  # duplicates: a unique index over `number` fails, with its error
        expect(world.admin.post(f"{base}/tables/invoices/rows",
                                json={"org": org, "number": "A-1"}), 201)
    indexes = f"{base}/tables/invoices/indexes"
    building = answers.fit("put", f"{APP}/tables/{{table}}/indexes/{{name}}", 202, expect(
        world.admin.put(f"{indexes}/once", json={"columns": ["number"], "unique": True}), 202))
    assert building["state"] == "building"
    failed = world.settled_index("invoices", "once")
    assert failed["state"] == "failed" and failed["error"]["code"] == "CONFLICT"
    answers.fit("get", f"{APP}/tables/{{table}}/indexes/{{name}}", 200, failed)
    answers.fit("get", f"{APP}/tables/{{table}}/indexes/{{name}}", 200, expect(
        world.admin.get(f"{indexes}/once"), 200))
    answers.fit("get", f"{APP}/tables/{{table}}/indexes", 200,
                expect(world.admin.get(indexes), 200))
    table = answers.fit("get", f"{APP}/tables/{{table}}", 200,
                        expect(world.admin.get(f"{base}/tables/invoices"), 200))
    assert [i["name"] for i in table["indexes"]] == ["once"]
    answers.fit("patch", f"{APP}/tables/{{table}}", 200, expect(world.admin.patch(
        f"{base}/tables/invoices", json={"displayColumn": "number",
                                         "operations": {"delete": False}}), 200))
    answers.fit("get", f"{APP}/tables", 200, expect(world.admin.get(f"{base}/tables"), 200))
    answers.fit("put", f"{APP}/roles/{{role}}", 200, expect(world.admin.put(
        f"{base}/roles/clerk", json={"permissions": ["invoices:read"], "grants": ["clerk"],
                                     "rowPolicies": {"invoices": {"status": {"eq": "paid"}}},
                                     "redact": {"invoices": ["vendor"]}}), 200))
    answers.fit("get", f"{APP}/roles/{{role}}", 200,
                expect(world.admin.get(f"{base}/roles/clerk"), 200))
    answers.fit("get", f"{APP}/roles", 200, expect(world.admin.get(f"{base}/roles"), 200))
    assert answers.checked == TABLES


def test_the_operators_answers_for_keys_invitations_mail_and_sessions_fit_the_declared_schemas(
        world: AppWorld, http: httpx.Client) -> None:
    answers, base = Answers(http), world.base
    world.role("clerk", ["*:*"])
    org = world.org("North")
    keys = f"{base}/orgs/{org}/keys"
    key = answers.fit("post", f"{APP}/orgs/{{org}}/keys", 201, expect(world.admin.post(
        keys, json={"name": "nightly", "roles": ["clerk"]}), 201))
    assert key["key"] and key["expiresAt"] is None and key["lastUsedAt"] is None
    listed = answers.fit("get", f"{APP}/orgs/{{org}}/keys", 200, expect(world.admin.get(keys), 200))
    assert "key" not in listed["items"][0]
    invitations = f"{base}/orgs/{org}/invitations"
    invitation = answers.fit("post", f"{APP}/orgs/{{org}}/invitations", 201, expect(
        world.admin.post(invitations, json={"email": "bo@north.test", "roles": ["clerk"]}), 201))
    assert invitation["invitedBy"] is None  # the operator
    answers.fit("get", f"{APP}/orgs/{{org}}/invitations", 200,
                expect(world.admin.get(invitations), 200))
    mail = answers.fit("get", f"{APP}/mail", 200, expect(world.admin.get(f"{base}/mail"), 200))
    assert [m["to"] for m in mail["items"]] == ["bo@north.test"]
    user = world.user()
    world.member(org, user["uid"], ["clerk"])
    world.login(user, org)
    sessions = answers.fit("get", f"{APP}/users/{{user}}/sessions", 200, expect(
        world.admin.get(f"{base}/users/{user['uid']}/sessions"), 200))
    assert len(sessions["items"]) == 1 and sessions["items"][0]["current"] is False
    assert answers.checked == ACCOUNTS


def test_the_console_answers_for_impersonation_preview_and_audit_fit_the_declared_schemas(
        world: AppWorld, http: httpx.Client) -> None:
    answers, base = Answers(http), world.base
    world.table("invoices", [{"name": "number", "type": "text"}, {"name": "amount",
                                                                   "type": "numeric"}])
    world.role("clerk", ["invoices:*"])
    expect(world.admin.put(f"{base}/roles/inviter", json={
        "permissions": ["org.members:create"], "grants": ["clerk"]}), 200)
    org = world.org("North")
    member = world.caller(org, ["clerk", "inviter"])
    expect(member.post(world.rows("invoices"), json={"number": "A-1", "amount": "2.50"}), 201)
    # A member's own change, so the log holds a member actor beside the operator's entries.
    expect(member.post(f"/{world.name}/org/invitations",
                       json={"email": "cy@north.test", "roles": ["clerk"]}), 201)
    token = answers.fit("post", f"{APP}/impersonate", 200, expect(world.admin.post(
        f"{base}/impersonate", json={"user": member.user_uid, "org": org, "ttl": 60}), 200))
    assert token["token_type"] == "Bearer" and token["expires_in"] == 60
    preview = answers.fit("post", f"{APP}/roles/{{role}}/preview", 200, expect(world.admin.post(
        f"{base}/roles/clerk/preview", json={
            "draft": {"permissions": ["invoices:read", "invoices:read_list"],
                      "redact": {"invoices": ["amount"]}},
            "user": member.user_uid, "org": org, "table": "invoices"}), 200))
    assert preview["redactedNow"] == ["amount"] and preview["roleHeld"] is True
    log = answers.fit("get", f"{APP}/audit", 200, expect(world.admin.get(f"{base}/audit"), 200))
    assert {e["actor"]["kind"] for e in log["items"]} == {"operator", "member"}
    assert answers.checked == CONSOLE


def test_every_admin_answer_is_declared_and_checked_by_fastapi_or_against_a_real_one_here(
) -> None:
    """A route whose `response_model` is a model has every answer checked by FastAPI; any other
    must declare its answer's model (`responses=`) and be in a group above. Rows are the app's
    own columns (the app's document types them), and a 204 answers nothing."""
    documented_only: set[tuple[str, str]] = set()
    for route in (route for router in ROUTERS for route in router.routes):
        if not isinstance(route, APIRoute) or not route.path.startswith("/admin/") \
                or route.status_code == 204 or "/rows" in route.path:
            continue
        model = route.response_model
        if isinstance(model, type) and issubclass(model, BaseModel):
            continue
        declared = route.responses.get(route.status_code or 200, {}).get("model")
        assert isinstance(declared, type) and issubclass(declared, BaseModel), route.path
        documented_only |= {(method.lower(), route.path) for method in route.methods}
    assert documented_only == TENANCY | TABLES | ACCOUNTS | CONSOLE
