"""The fan-out bench's app, built over HTTP: its table and roles, orgs, users and their
logins, and the rows its writers send.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.harness import Server

TABLE = "events"
COLUMNS = [
    {"name": "title", "type": "text", "required": True},
    {"name": "status", "type": "text", "default": "open"},
    {"name": "secret", "type": "text"},
    {"name": "stamp", "type": "text"},
    {"name": "qty", "type": "integer"},
]
READ = [f"{TABLE}:read_list", f"{TABLE}:read"]
ROLES: dict[str, dict[str, Any]] = {
    "reader": {"permissions": READ},
    "auditor": {"permissions": READ, "redact": {TABLE: ["secret"]}},
    "field": {"permissions": READ, "rowPolicies": {TABLE: {"status": {"ne": "draft"}}},
              "redact": {TABLE: ["secret"]}},
}
WRITER = {"permissions": [*READ, f"{TABLE}:create"]}


def table_names(count: int) -> list[str]:
    """The bench's tables: `events`, then `events1` ... for the multi-table mode."""
    return [TABLE] + [f"{TABLE}{i}" for i in range(1, count)]


def role_body(role: str, tables: list[str]) -> dict[str, Any]:
    """A role of ROLES (or `writer`) granting the same thing on each of `tables`."""
    body = {**ROLES, "writer": WRITER}[role]
    out: dict[str, Any] = {"permissions": [], "rowPolicies": {}, "redact": {}}
    for name in tables:
        out["permissions"] += [p.replace(f"{TABLE}:", f"{name}:") for p in body["permissions"]]
        for key in ("rowPolicies", "redact"):
            if TABLE in body.get(key, {}):
                out[key][name] = body[key][TABLE]
    return out


def ok(response: httpx.Response) -> Any:
    if response.status_code >= 300:
        raise SystemExit(f"setup failed: {response.request.method} {response.request.url} "
                         f"→ {response.status_code} {response.text}")
    return response.json() if response.content else None


@dataclass
class World:
    app: str
    app_uid: str
    orgs: list[str]
    # (org index, role) → access tokens of distinct users with that single role in that org
    tokens: dict[tuple[int, str], list[str]]
    writers: list[str]  # one writer token per org (same index)
    logins: int = 0  # tokens obtained by a real password login (the rest minted)
    tables: list[str] = field(default_factory=lambda: [TABLE])


def build_world(server: Server, orgs: int, users_per_class: int, roles: list[str] | None = None,
                writers: bool = True, login_all: bool = False, tables: int = 1,
                capture: bool = False) -> World:
    """App, table, orgs, roles; per role `users_per_class` users, each a member of every org
    with that one role (plus one writer user, member of every org); an access token per
    (user, org).

    Tokens: one real password login per role proves the path; the others are minted with the
    platform's own encoder and the server's signing key (AUTHORIC_JWT_SECRET), because every
    login costs an Argon2 verification (~0.1-0.5 s of server CPU here). The server checks
    minted tokens exactly like issued ones (signature, claims, membership looked up).
    `login_all` logs in for every token instead."""
    from authoric.auth import tokens as jwt_tokens

    roles = roles or list(ROLES)
    admin = httpx.Client(base_url=server.url, timeout=120,
                         headers={"Authorization": f"Bearer {server.admin_token}"})
    app = f"bench_{secrets.token_hex(4)}"
    base = f"/admin/apps/{app}"
    app_uid = ok(admin.post("/admin/apps", json={"name": app}))["uid"]
    ok(admin.patch(base, json={"settings": {"accessTokenTtl": 86_400}}))
    names = table_names(tables)
    for name in names:
        ok(admin.post(f"{base}/tables", json={"name": name, "columns": COLUMNS,
                                              "captureSqlWrites": capture}))
    for role in [*roles, "writer"]:
        ok(admin.put(f"{base}/roles/{role}", json=role_body(role, names)))
    org_uids = [ok(admin.post(f"{base}/orgs", json={"name": f"org {i}"}))["uid"]
                for i in range(orgs)]
    people = [(role, n) for role in roles for n in range(users_per_class)]
    if writers:
        people.append(("writer", 0))
    password = "bench password"
    users: dict[tuple[str, int], dict[str, Any]] = {}
    for role, n in people:
        email = f"{role}{n}-{secrets.token_hex(3)}@bench.test"
        users[(role, n)] = {"email": email, **ok(admin.post(
            f"{base}/users", json={"email": email, "password": password}))}

    async def enrol() -> None:
        gate = asyncio.Semaphore(8)
        async with httpx.AsyncClient(base_url=server.url, timeout=120, headers={
                "Authorization": f"Bearer {server.admin_token}"}) as client:
            async def one(org: str, role: str, user: str) -> None:
                async with gate:
                    ok(await client.put(f"{base}/orgs/{org}/members/{user}", json={"roles": [role]}))
            await asyncio.gather(*[one(org, role, users[(role, n)]["uid"])
                                   for org in org_uids for role, n in people])

    asyncio.run(enrol())
    secret = server.jwt_secret if server.db_url else None
    memberships = asyncio.run(_membership_uids(server.db_url, app_uid)) if secret else {}
    out: dict[tuple[int, str], list[str]] = defaultdict(list)
    logins = 0
    for role, n in people:
        user = users[(role, n)]
        for i, org in enumerate(org_uids):
            if login_all or (n == 0 and i == 0) or not secret:
                pair = ok(admin.post(f"/{app}/auth/token", json={
                    "email": user["email"], "password": password, "org": org}))
                token, logins = pair["access_token"], logins + 1
            else:
                token = jwt_tokens.encode(secret, jwt_tokens.Claims(
                    uuid.UUID(app_uid), uuid.UUID(user["uid"]), uuid.UUID(org), uuid.uuid4(),
                    time.time() + 86_400, jwt_tokens.ACCESS,
                    membership=memberships[(uuid.UUID(org), uuid.UUID(user["uid"]))]))
            out[(i, role)].append(token)
    admin.close()
    writer_tokens = [out.pop((i, "writer"))[0] for i in range(orgs)] if writers else []
    return World(app, app_uid, org_uids, dict(out), writer_tokens, logins, names)


async def _membership_uids(db_url: str, app_uid: str) -> dict[tuple[uuid.UUID, uuid.UUID], uuid.UUID]:
    """Each membership's uid (a minted access token names its membership, as issued ones do)."""
    import asyncpg

    conn = await asyncpg.connect(db_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        rows = await conn.fetch("SELECT org_uid, user_uid, uid FROM authoric.members "
                                "WHERE app_uid = $1", uuid.UUID(app_uid))
    finally:
        await conn.close()
    return {(r["org_uid"], r["user_uid"]): r["uid"] for r in rows}


def row_body(n: int, draft: bool, stamp: float) -> bytes:
    return json.dumps({"title": f"event {n}", "status": "draft" if draft else "open",
                       "secret": f"s-{n}", "stamp": f"{stamp:.6f}", "qty": n % 100}).encode()
