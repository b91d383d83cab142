"""The answers the platform document declares for orgs, users and members, against what the
routes really answer: an operator (or a client generated from the document) reading an org, a
user, a membership or a page of members gets exactly the declared shape."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema_rs

from tests.scenario import AppWorld, expect


def _fits(doc: dict[str, Any], method: str, path: str, status: str, answer: Any) -> None:
    schema = doc["paths"][path][method]["responses"][status]["content"]["application/json"][
        "schema"]
    assert "$ref" in schema, schema
    jsonschema_rs.Draft202012Validator({**schema, "components": doc["components"]}).validate(
        answer)


def test_the_operators_answers_for_orgs_users_and_members_fit_the_declared_schemas(
        world: AppWorld, http: httpx.Client) -> None:
    doc = expect(http.get("/openapi.json"), 200)
    world.role("clerk", ["*:*"])
    base, prefix = world.base, "/admin/apps/{app}"
    org = expect(world.admin.post(f"{base}/orgs", json={"name": "North"}), 201)
    _fits(doc, "post", f"{prefix}/orgs", "201", org)
    _fits(doc, "get", f"{prefix}/orgs", "200", expect(world.admin.get(f"{base}/orgs"), 200))
    user = expect(world.admin.post(f"{base}/users", json={"email": "ada@north.test",
                                                          "password": "correct horse"}), 201)
    _fits(doc, "post", f"{prefix}/users", "201", user)
    _fits(doc, "get", f"{prefix}/users", "200", expect(world.admin.get(f"{base}/users"), 200))
    member = expect(world.admin.put(f"{base}/orgs/{org['uid']}/members/{user['uid']}",
                                    json={"roles": ["clerk"]}), 200)
    _fits(doc, "put", f"{prefix}/orgs/{{org}}/members/{{user}}", "200", member)
    members = expect(world.admin.get(f"{base}/orgs/{org['uid']}/members"), 200)
    assert [m["email"] for m in members["items"]] == ["ada@north.test"]
    _fits(doc, "get", f"{prefix}/orgs/{{org}}/members", "200", members)
    memberships = expect(world.admin.get(f"{base}/users/{user['uid']}/memberships"), 200)
    assert memberships["items"] == [{"org": org["uid"], "orgName": "North", "roles": ["clerk"]}]
    _fits(doc, "get", f"{prefix}/users/{{user}}/memberships", "200", memberships)
