"""What the Python client tests share: an app with invoices and vendors, a member who may do
everything with them, and waiting on a condition (never on a sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll `condition` until it is truthy; fail after `timeout` (which only a bug reaches)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
