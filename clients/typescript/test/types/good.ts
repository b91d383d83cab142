// Compiles with `tsc --noEmit`: every call typed from AcmeTables. Each `@ts-expect-error`
// line must be an error, or tsc fails ("unused directive"): the mistakes it names are caught.
import { createClient, type ChangeEvent } from "../../src/index.ts";
import type { AcmeTables, InvoicesRow } from "./acme.ts";

const db = createClient<AcmeTables>({ url: "http://127.0.0.1:8000", app: "acme" });
const invoices = db.table("invoices");

export async function typed(): Promise<void> {
  const page = await invoices.list({
    filter: { status: "paid", amount: { gte: "100" }, or: [{ lines: { in: [1, 2] } }, { approved: true }] },
    order: "-createdAt", limit: 50, expand: ["vendor", "vendor.country"], count: true,
  });
  const first: InvoicesRow | undefined = page.items[0];
  const total: number | undefined = page.total;
  const row = await invoices.create({ number: "INV-1", amount: "10.00", status: "draft", meta: { any: "json" } });
  const status: "draft" | "paid" | null = row.status;
  await invoices.update(row.uid, { status: "paid" });
  await invoices.updateWhere({ status: "draft" }, { status: "paid" });
  await invoices.deleteWhere({ vendor_uid: { is_null: true } });
  const vendor = await db.table("vendors").get("uid", { expand: ["country"] });
  const name: string = vendor.name;
  invoices.subscribe({ onEvent: (e: ChangeEvent<InvoicesRow>) => void (e.op === "delete" ? e.rowUid : e.row.number) });
  db.subscribe(["invoices", "vendors"], {
    onEvent: (e) => {
      if (e.table === "vendors" && e.op !== "delete") void e.row.name; // narrowed by table
    },
  });
  invoices.liveQuery({ filter: { status: "paid" }, order: "number", limit: 10 }, (rows) => void rows.map((r) => r.amount));
  void [first, total, status, name];

  // Expanded references are typed by the paths asked for; their rows are loose (UntypedRow).
  const expanded = await invoices.list({ expand: ["vendor", "vendor.country"], count: "exact" });
  const vendorRow: { uid: string } | null = expanded.items[0].expand.vendor;
  const country: { uid: string } | null | undefined = expanded.items[0].expand.vendor?.expand.country;
  const written = await invoices.update(row.uid, { status: "paid" }, { expand: ["vendor"] });
  void [vendorRow, country, written.expand.vendor?.name];
  // @ts-expect-error: only the references asked for are expanded
  void expanded.items[0].expand.country;
  // @ts-expect-error: a row read without expand has no typed expanded reference
  void row.expand.vendor;

  // @ts-expect-error: no such column
  await invoices.create({ nmber: "INV-2" });
  // @ts-expect-error: a select column takes one of its options
  await invoices.update(row.uid, { status: "void" });
  // @ts-expect-error: integer columns take numbers
  await invoices.update(row.uid, { lines: "3" });
  // @ts-expect-error: uid is the server's
  await invoices.create({ number: "INV-3", uid: "mine" });
  // @ts-expect-error: no such table
  db.table("invoice");
  // @ts-expect-error: order names a column
  await invoices.list({ order: "-created" });
  // @ts-expect-error: filter values have the column's type
  await invoices.list({ filter: { approved: "yes" } });
  // @ts-expect-error: only reference columns expand
  await invoices.list({ expand: ["number"] });
  // @ts-expect-error: the row read back has no such column
  void row.vendor;
}
