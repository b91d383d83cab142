"""Correct use of types from `authoric typegen --lang py` (checked by mypy, never run)."""

from acme_types import AcmeTables, AsyncAcmeTables, InvoicesRow
from authoric_client import AsyncClient, Client


def use(db: Client[AcmeTables]) -> str:
    invoices = db.table("invoices")
    row: InvoicesRow = invoices.create({"number": "A-1", "status": "draft", "amount": "10.00"})
    invoices.update(row["uid"], {"status": "paid", "vendor_uid": None})
    page = invoices.list(filter={"status": "paid", "amount": {"gte": 100}, "or": [
        {"vendor_uid": {"is_null": True}}, {"number": {"like": "A-%"}}]}, order="-createdAt")
    invoices.update_where({"status": {"in": ["draft"]}}, {"status": "paid"})
    vendors = db.table("vendors")
    rating: int | None = vendors.get("some-uid")["rating"]
    vendors.delete_where({"rating": {"lt": 2}, "not": {"active": True}})
    for event in invoices.subscribe():
        if event.row is not None:
            return event.row["number"] + str(rating) + str(len(page.items))
    return ""


async def use_async(db: AsyncClient[AsyncAcmeTables]) -> bool | None:
    vendor = await db.table("vendors").create({"name": "Acme", "active": True})
    live = db.table("vendors").live_query(filter={"active": True}, order="name", limit=10)
    await live.ready()
    return vendor["active"] and bool(live.rows)


untyped = Client("http://127.0.0.1:8000", "acme")  # no type argument: rows are plain dicts
anything: object = untyped.table("whatever").list(filter={"x": 1}, order="y").items[0]["z"]
