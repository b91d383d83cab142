"""Wrong use of types from `authoric typegen --lang py`: mypy must refuse each marked line."""

from acme_types import AcmeTables
from authoric_client import Client


def use(db: Client[AcmeTables]) -> None:
    invoices = db.table("invoices")
    invoices.create({"numbr": "A-1"})  # deliberate error: no such column
    invoices.update("uid", {"status": "sent"})  # deliberate error: not one of the options
    amount: int = invoices.get("uid")["amount"]  # deliberate error: a numeric is a string
    db.table("invoicez")  # deliberate error: no such table
    invoices.list(filter={"statuss": "paid"})  # deliberate error: no such column to filter on
    invoices.list(filter={"number": {"gte": 1}})  # deliberate error: a text compares to text
    invoices.list(order="-amont")  # deliberate error: no such column to order by
    print(amount)
