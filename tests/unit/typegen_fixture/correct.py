"""Correct use of types from `authoric typegen --lang py` (checked by mypy, never run)."""

from acme_types import AcmeTables, AsyncAcmeTables, InvoicesRow
from authoric_client import AsyncClient, Client


def use(db: Client[AcmeTables]) -> str:
    invoices = db.table("invoices")
    row: InvoicesRow = invoices.create({"number": "A-1", "status": "draft", "amount": "10.00"})
    invoices.update(row["uid"], {"status": "paid", "vendor_uid": None})
    page = invoices.list(filter={"status": "paid"}, order="-createdAt", limit=10)
    vendors = db.table("vendors")
    rating: int | None = vendors.get("some-uid")["rating"]
    for event in invoices.subscribe():
        if event.row is not None:
            return event.row["number"] + str(rating) + str(len(page.items))
    return ""


async def use_async(db: AsyncClient[AsyncAcmeTables]) -> bool | None:
    vendor = await db.table("vendors").create({"name": "Acme", "active": True})
    live = db.table("vendors").live_query(order="name")
    await live.ready()
    return vendor["active"] and bool(live.rows)


untyped = Client("http://127.0.0.1:8000", "acme")  # no type argument: rows are plain dicts
anything: object = untyped.table("whatever").get("uid")["any column"]
