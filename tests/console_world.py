"""A shop for the console's API tests (contract section 2a): vendors and invoices in two orgs,
a clerk in each, a `viewer` role that hides drafts and redacts `amount`, and helpers for the
operator's routes (`/admin/apps/{app}/...`)."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.scenario import AppWorld, Caller, expect
from tests.sse import db_fetch

INVOICE_COLUMNS: list[dict[str, Any]] = [
    {"name": "number", "type": "text", "required": True, "unique": True},
    {"name": "vendor", "type": "reference", "references": "vendors"},
    {"name": "status", "type": "text", "default": "received"},
    {"name": "amount", "type": "numeric"},
    {"name": "note", "type": "text"},
]
READ = ["invoices:read_list", "invoices:read"]


@dataclass
class Shop:
    world: AppWorld
    north: str
    south: str
    north_clerk: Caller
    south_clerk: Caller
    counter: int = 0
    uids: dict[str, str] = field(default_factory=dict)

    @property
    def admin(self) -> Caller:
        return self.world.admin

    @property
    def base(self) -> str:
        return self.world.base

    def admin_rows(self, table: str = "invoices") -> str:
        return f"{self.base}/tables/{table}/rows"

    def invoice(self, caller: Caller | None = None, **values: Any) -> dict[str, Any]:
        """A new invoice written over REST by `caller` (the north clerk by default)."""
        self.counter += 1
        body = {"number": f"INV-{self.counter}", **values}
        row = dict(expect((caller or self.north_clerk).post(self.world.rows("invoices"),
                                                            json=body), 201))
        self.uids[body["number"]] = row["uid"]
        return row

    def admin_invoice(self, org: str, **values: Any) -> dict[str, Any]:
        """A new invoice written by the operator into `org`."""
        self.counter += 1
        body = {"org": org, "number": f"INV-{self.counter}", **values}
        return dict(expect(self.admin.post(self.admin_rows(), json=body), 201))

    def admin_list(self, **params: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = expect(self.admin.get(
            self.admin_rows(), params={"limit": 1000, **params}), 200)["items"]
        return items

    def member_list(self, caller: Caller, **params: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = expect(caller.get(
            self.world.rows("invoices"), params={"limit": 1000, **params}), 200)["items"]
        return items

    def member(self, org: str, roles: list[str]) -> dict[str, Any]:
        """A new user, member of `org` with `roles` (not logged in)."""
        user = self.world.user()
        self.world.member(org, user["uid"], roles)
        return user

    def impersonate(self, user: dict[str, Any], org: str, **extra: Any) -> Caller:
        body = expect(self.admin.post(f"{self.base}/impersonate",
                                      json={"user": user["uid"], "org": org, **extra}), 200)
        return Caller(self.admin.client, body["access_token"], None, user["uid"], org)

    def audit(self, **params: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = expect(self.admin.get(
            f"{self.base}/audit", params={"limit": 1000, **params}), 200)["items"]
        return items

    def app_uid(self) -> uuid.UUID:
        return uuid.UUID(expect(self.admin.get(self.base), 200)["uid"])

    def log_entries(self, database_url: str) -> list[tuple[str, str, str | None, str]]:
        """The app's change log as (table, op, row uid, org uid), in insertion order."""
        rows = db_fetch(database_url, "SELECT table_name, op, row_uid, org_uid FROM "
                        "authoric.changes WHERE app_uid = $1 ORDER BY id", self.app_uid())
        return [(r["table_name"], r["op"], None if r["row_uid"] is None else str(r["row_uid"]),
                 str(r["org_uid"])) for r in rows]


def build_shop(world: AppWorld) -> Shop:
    world.table("vendors", [{"name": "name", "type": "text", "required": True, "unique": True}])
    world.table("invoices", INVOICE_COLUMNS)
    north, south = world.org("North"), world.org("South")
    world.role("clerk", ["invoices:*", "vendors:*"])
    world.role("viewer", READ, row_policies={"invoices": {"status": {"ne": "draft"}}},
               redact={"invoices": ["amount"]})
    return Shop(world, north, south, world.caller(north, ["clerk"]),
                world.caller(south, ["clerk"]))


def claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, unverified (what a client could read)."""
    payload = token.split(".")[1]
    doc: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return doc


def without_org(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "org"}


def error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    body = expect(response, status, code)
    details: dict[str, Any] = body["error"]["details"]
    return details
