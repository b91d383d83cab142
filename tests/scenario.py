"""Builders for API scenarios: an app with tables, orgs, users, roles and members, over HTTP.

Tests say who is calling; these helpers make those callers.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.servers import ServerProcess

INDEX_BUILD_WAIT = 60.0  # seconds a build of a few rows may take on a loaded machine


def token_exp(token: str) -> int:
    """The `exp` claim of an access token: when it expires, in the server's clock."""
    payload = token.split(".")[1]
    return int(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"])


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@dataclass
class Caller:
    """An HTTP client that sends one bearer token."""

    client: httpx.Client
    token: str | None = None
    refresh_token: str | None = None
    user_uid: str | None = None
    org_uid: str | None = None

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return {**headers, **(extra or {})}

    def request(self, method: str, path: str, *, headers: dict[str, str] | None = None,
                **kw: Any) -> httpx.Response:
        return self.client.request(method, path, headers=self._headers(headers), **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)

    def patch(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("PATCH", path, **kw)

    def put(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", path, **kw)

    def delete(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", path, **kw)


def expect(response: httpx.Response, status: int, code: str | None = None) -> Any:
    """Assert the status (and error code); return the parsed body, if any."""
    assert response.status_code == status, (response.status_code, response.text)
    if code is not None:
        assert response.json()["error"]["code"] == code, response.text
    return response.json() if response.content else None


@dataclass
class AppWorld:
    """One app on a running server, with helpers to populate it as the admin."""

    server: ServerProcess
    name: str
    admin: Caller
    orgs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, server: ServerProcess, client: httpx.Client) -> AppWorld:
        admin = Caller(client, server.admin_token)
        name = unique("app")
        expect(admin.post("/admin/apps", json={"name": name}), 201)
        return cls(server, name, admin)

    @property
    def base(self) -> str:
        return f"/admin/apps/{self.name}"

    def table(self, name: str, columns: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return expect(self.admin.post(f"{self.base}/tables",
                                      json={"name": name, "columns": columns, **extra}), 201)

    def org(self, name: str) -> str:
        uid = expect(self.admin.post(f"{self.base}/orgs", json={"name": name}), 201)["uid"]
        self.orgs[name] = uid
        return str(uid)

    def role(self, name: str, permissions: list[str], row_policies: dict[str, Any] | None = None,
             redact: dict[str, list[str]] | None = None) -> dict[str, Any]:
        body = {"permissions": permissions, "rowPolicies": row_policies or {},
                "redact": redact or {}}
        return expect(self.admin.put(f"{self.base}/roles/{name}", json=body), 200)

    def user(self, email: str | None = None, password: str = "correct horse") -> dict[str, Any]:
        email = email or f"{unique('u')}@example.com"
        body = expect(self.admin.post(f"{self.base}/users",
                                      json={"email": email, "password": password}), 201)
        return {**body, "password": password}

    def member(self, org_uid: str, user_uid: str, roles: list[str]) -> None:
        expect(self.admin.put(f"{self.base}/orgs/{org_uid}/members/{user_uid}",
                              json={"roles": roles}), 200)

    def login(self, user: dict[str, Any], org_uid: str | None = None) -> Caller:
        body: dict[str, Any] = {"email": user["email"], "password": user["password"]}
        if org_uid:
            body["org"] = org_uid
        pair = expect(self.admin.client.post(f"/{self.name}/auth/token", json=body), 200)
        return Caller(self.admin.client, pair["access_token"], pair["refresh_token"],
                      user["uid"], org_uid)

    def caller(self, org_uid: str, roles: list[str]) -> Caller:
        """A new user, member of `org_uid` with `roles`, logged in there."""
        user = self.user()
        self.member(org_uid, user["uid"], roles)
        return self.login(user, org_uid)

    def settled_index(self, table: str, name: str) -> dict[str, Any]:
        """The index once it is no longer building (waits on the condition, never a fixed
        time; gives up after INDEX_BUILD_WAIT seconds)."""
        deadline = time.monotonic() + INDEX_BUILD_WAIT
        while True:
            got = expect(self.admin.get(f"{self.base}/tables/{table}/indexes/{name}"), 200)
            if got["state"] != "building" or time.monotonic() > deadline:
                return dict(got)
            time.sleep(0.1)

    def rows(self, table: str) -> str:
        return f"/{self.name}/autocrud/{table}"
