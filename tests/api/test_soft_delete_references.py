"""Soft-delete tables keep reference and uniqueness rules as a user sees them: a
soft-deleted row is gone, so it cannot be referenced, it frees its unique values, and a
row still referenced cannot be soft-deleted."""

from __future__ import annotations

import pytest

from tests.scenario import AppWorld, Caller, expect


@pytest.fixture
def clerk(world: AppWorld) -> Caller:
    world.table("vendors", [{"name": "name", "type": "text", "unique": True}], softDelete=True)
    world.table("invoices", [{"name": "number", "type": "text"},
                             {"name": "vendor", "type": "reference", "references": "vendors"}],
                softDelete=True)
    world.role("clerk", ["vendors:*", "invoices:*"])
    return world.caller(world.org("Northwind"), ["clerk"])


def test_member_cannot_soft_delete_a_vendor_an_invoice_still_references(
        world: AppWorld, clerk: Caller) -> None:
    vendor = expect(clerk.post(world.rows("vendors"), json={"name": "Acme"}), 201)
    expect(clerk.post(world.rows("invoices"), json={"number": "1", "vendor_uid": vendor["uid"]}), 201)
    expect(clerk.delete(f"{world.rows('vendors')}/{vendor['uid']}"), 409, "CONFLICT")
    expect(clerk.get(f"{world.rows('vendors')}/{vendor['uid']}"), 200)
    expect(clerk.delete(world.rows("vendors"), params={"name": "Acme"}), 409, "CONFLICT")
    assert [v["uid"] for v in expect(clerk.get(world.rows("vendors")), 200)["items"]] == [
        vendor["uid"]]


def test_member_can_soft_delete_a_vendor_once_its_invoices_are_deleted(
        world: AppWorld, clerk: Caller) -> None:
    vendor = expect(clerk.post(world.rows("vendors"), json={"name": "Acme"}), 201)
    invoice = expect(clerk.post(world.rows("invoices"),
                                json={"number": "1", "vendor_uid": vendor["uid"]}), 201)
    expect(clerk.delete(f"{world.rows('invoices')}/{invoice['uid']}"), 204)
    expect(clerk.delete(f"{world.rows('vendors')}/{vendor['uid']}"), 204)
    expect(clerk.get(f"{world.rows('vendors')}/{vendor['uid']}"), 404, "NOT_FOUND")
    assert expect(clerk.get(world.rows("vendors")), 200)["items"] == []
    assert expect(clerk.get(world.rows("invoices")), 200)["items"] == []


def test_member_cannot_reference_a_soft_deleted_vendor(world: AppWorld, clerk: Caller) -> None:
    vendor = expect(clerk.post(world.rows("vendors"), json={"name": "Gone"}), 201)
    expect(clerk.delete(f"{world.rows('vendors')}/{vendor['uid']}"), 204)
    expect(clerk.get(f"{world.rows('vendors')}/{vendor['uid']}"), 404, "NOT_FOUND")
    expect(clerk.post(world.rows("invoices"), json={"number": "2", "vendor_uid": vendor["uid"]}),
           409, "CONFLICT")
    assert expect(clerk.get(world.rows("invoices")), 200)["items"] == []


def test_member_can_reuse_the_unique_name_of_a_soft_deleted_vendor(
        world: AppWorld, clerk: Caller) -> None:
    vendor = expect(clerk.post(world.rows("vendors"), json={"name": "Acme"}), 201)
    expect(clerk.post(world.rows("vendors"), json={"name": "Acme"}), 409, "CONFLICT")
    expect(clerk.delete(f"{world.rows('vendors')}/{vendor['uid']}"), 204)
    again = expect(clerk.post(world.rows("vendors"), json={"name": "Acme"}), 201)
    assert again["uid"] != vendor["uid"]
    listed = expect(clerk.get(world.rows("vendors")), 200)["items"]
    assert [(v["uid"], v["name"]) for v in listed] == [(again["uid"], "Acme")]
