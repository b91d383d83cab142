"""A first end-to-end walk: admin builds an app, a member writes and reads rows."""

from tests.scenario import AppWorld, expect


def test_member_with_permissions_creates_and_reads_an_invoice(world: AppWorld) -> None:
    world.table("invoices", [{"name": "number", "type": "text", "required": True},
                             {"name": "amount", "type": "numeric"}])
    org = world.org("Northwind")
    world.role("clerk", ["invoices:*"])
    clerk = world.caller(org, ["clerk"])
    row = expect(clerk.post(world.rows("invoices"), json={"number": "A-1", "amount": "10.50"}), 201)
    assert row["amount"] == "10.50"
    got = expect(clerk.get(f"{world.rows('invoices')}/{row['uid']}"), 200)
    assert got == row
