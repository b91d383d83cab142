// Must NOT compile: one deliberate mistake, on the line marked below.
import { createClient } from "../../src/index.ts";
import type { AcmeTables } from "./acme.ts";

const db = createClient<AcmeTables>({ url: "http://127.0.0.1:8000", app: "acme" });

export async function mistake(): Promise<void> {
  await db.table("invoices").create({ number: "INV-1", amount: 12.5 }); // DELIBERATE ERROR: numeric is a string
}
