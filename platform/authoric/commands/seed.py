"""`authoric seed --demo`: a demo app (vendors, invoices, payments; two orgs; clerk and
auditor roles with a row policy and redacted columns) and what to try next."""

from __future__ import annotations

from typing import Any

from authoric.catalog import apps
from authoric.catalog.apps import NewApp
from authoric.catalog.model import TableDef
from authoric.catalog.roles import RoleDef
from authoric.errors import AuthoricError
from authoric.sdk import Authoric
from authoric.tables import definitions
from authoric.tenancy import service as tenancy
from authoric.tenancy.models import Membership, NewOrg, NewUser

PASSWORD = "demo-password"
TABLES: list[dict[str, Any]] = [
    {"name": "vendors", "columns": [
        {"name": "name", "type": "text", "required": True, "unique": True},
        {"name": "tax_id", "type": "text"}]},
    {"name": "invoices", "columns": [
        {"name": "invoice_number", "type": "text", "required": True, "unique": True},
        {"name": "vendor", "type": "reference", "references": "vendors"},
        {"name": "status", "type": "text", "default": "received"},
        {"name": "amount", "type": "numeric"},
        {"name": "due", "type": "date"}]},
    {"name": "payments", "columns": [
        {"name": "invoice", "type": "reference", "references": "invoices", "required": True},
        {"name": "amount", "type": "numeric", "required": True},
        {"name": "bank_account", "type": "text"},
        {"name": "paid_at", "type": "timestamp"}]},
]
ROLES: dict[str, dict[str, Any]] = {
    "clerk": {"permissions": ["vendors:*", "invoices:*", "payments:read_list", "payments:read"],
              "rowPolicies": {"invoices": {"status": {"ne": "archived"}}},
              "redact": {"payments": ["bank_account"]}},
    "auditor": {"permissions": ["*:read_list", "*:read"],
                "rowPolicies": {"invoices": {"status": {"in": ["approved", "paid"]}}},
                "redact": {"vendors": ["tax_id"], "payments": ["bank_account"]}},
}


async def _build(sdk: Authoric, name: str) -> dict[str, Any]:
    async with sdk.engine.begin() as conn:
        await apps.create_app(conn, NewApp(name=name))
        for table in TABLES:
            await definitions.create_table(conn, name, TableDef.model_validate(table))
        for role, body in ROLES.items():
            await tenancy.put_role(conn, name, role, RoleDef.model_validate(body))
        users: dict[str, Any] = {}
        for org_name, domain in (("Northwind", "northwind.test"), ("Contoso", "contoso.test")):
            org = await tenancy.create_org(conn, name, NewOrg(name=org_name))
            for role in ROLES:
                user = await tenancy.create_user(conn, name, NewUser(email=f"{role}@{domain}",
                                                                     password=PASSWORD))
                await tenancy.put_member(conn, name, org["uid"], user["uid"],
                                         Membership(roles=[role]))
                users[user["email"]] = org["uid"]
    return users


async def _rows(sdk: Authoric, app: str, org: str, prefix: str) -> None:
    async with sdk.as_app(app, org) as s:
        vendor = await s.create("vendors", {"name": f"{prefix} Paper Co", "tax_id": f"{prefix}-77"})
        for i, (status, amount) in enumerate(
                [("received", "120.00"), ("approved", "8760.00"), ("paid", "42.50")], start=1):
            invoice = await s.create("invoices", {"invoice_number": f"{prefix}-{i:04d}",
                                                  "vendor_uid": vendor["uid"], "status": status,
                                                  "amount": amount, "due": "2027-01-31"})
            if status == "paid":
                await s.create("payments", {"invoice_uid": invoice["uid"], "amount": amount,
                                            "bank_account": "DE89 3704 0044 0532 0130 00",
                                            "paid_at": "2026-12-01T10:00:00Z"})


async def run_seed(app: str, base_url: str) -> int:
    sdk = await Authoric.connect()
    try:
        users = await _build(sdk, app)
        await _rows(sdk, app, users["clerk@northwind.test"], "NW")
        await _rows(sdk, app, users["clerk@contoso.test"], "CT")
    except AuthoricError as exc:
        print(f"seed failed: {exc.code}: {exc.message} {exc.details or ''}")
        return 1
    finally:
        await sdk.close()
    print(_next_steps(app, base_url))
    return 0


def _next_steps(app: str, url: str) -> str:
    return f"""Seeded app {app!r}: vendors, invoices, payments in two orgs (Northwind, Contoso).
Users (password {PASSWORD!r}): clerk@northwind.test, auditor@northwind.test,
clerk@contoso.test, auditor@contoso.test. Clerks see all invoices but archived ones and no
bank accounts; auditors read everything, only approved or paid invoices, no tax ids.

Try, with the server running at {url}:
  TOKEN=$(curl -s -X POST {url}/{app}/auth/token -H 'Content-Type: application/json' \\
    -d '{{"email":"auditor@northwind.test","password":"{PASSWORD}"}}' \
    | python3 -c 'import sys,json;print(json.load(sys.stdin)["access_token"])')
  curl -s {url}/{app}/autocrud/invoices -H "Authorization: Bearer $TOKEN"
  curl -s {url}/{app}/autocrud/vendors -H "Authorization: Bearer $TOKEN"
  curl -N {url}/{app}/autocrud/invoices/subscribe -H "Authorization: Bearer $TOKEN" \
    -H 'Accept: text/event-stream'
"""
