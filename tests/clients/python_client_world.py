"""What the Python client tests share: an app with invoices and vendors, a member who may do
everything with them, and waiting on a condition (never on a sleep)."""

from __future__ import annotations

from dataclasses import dataclass

from tests.scenario import AppWorld

INVOICE_COLUMNS = [
    {"name": "number", "type": "text", "required": True, "unique": True},
    {"name": "vendor", "type": "reference", "references": "vendors"},
    {"name": "status", "type": "text"},
    {"name": "amount", "type": "numeric"},
    {"name": "seq", "type": "integer"},
    {"name": "due", "type": "date"},
]


@dataclass
class Shop:
    world: AppWorld
    org: str
    email: str
    password: str

    def member(self) -> tuple[str, str]:
        """Another member of the same org, with the same role: (email, password)."""
        user = self.world.user()
        self.world.member(self.org, user["uid"], ["clerk"])
        return user["email"], user["password"]


def shop(world: AppWorld) -> Shop:
    world.table("vendors", [{"name": "name", "type": "text", "required": True}])
    world.table("invoices", INVOICE_COLUMNS)
    world.role("clerk", ["invoices:*", "vendors:*"])
    org = world.org("Northwind")
    user = world.user()
    world.member(org, user["uid"], ["clerk"])
    return Shop(world, org, user["email"], user["password"])
