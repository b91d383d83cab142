import { describe, expect, it } from "vitest";
import { createClient, type Client, type Expanded, type LiveQueryOptions } from "../src/index.ts";
import { until, URL_, world, type InvoicesRow, type ShopTables } from "./world.ts";

type Row = InvoicesRow;

/** Waits until the live query's rows are exactly what a fresh list returns now. */
async function converges(db: Client<ShopTables>, query: LiveQueryOptions<Row>, rows: () => Row[]): Promise<Row[]> {
  let fresh: Row[];
  const deadline = Date.now() + 60_000;
  for (;;) {
    fresh = (await db.table("invoices").list({ ...query, limit: query.limit ?? 1000 })).items;
    if (JSON.stringify(rows()) === JSON.stringify(fresh)) return fresh;
    if (Date.now() > deadline) {
      expect(rows()).toEqual(fresh);
      return fresh;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function mixOfWrites(db: Client<ShopTables>): Promise<void> {
  const invoices = db.table("invoices");
  const made: Row[] = [];
  for (let i = 0; i < 12; i++) {
    made.push(await invoices.create({ number: `L-${i}`, seq: i, status: i % 3 ? "open" : "draft", amount: `${i * 10}.5` }));
  }
  await invoices.update(made[1].uid, { status: "draft" }); // leaves a status=open query
  await invoices.update(made[3].uid, { status: "open" }); // joins it
  await invoices.update(made[4].uid, { seq: 100 }); // moves to the top of -seq
  await invoices.update(made[10].uid, { seq: -5 }); // moves to the bottom
  await invoices.delete(made[11].uid);
  await invoices.delete(made[7].uid);
  await invoices.importCsv("number,seq,status,amount\nL-imp-1,50,open,1.00\nL-imp-2,51,draft,2.00\n");
  await invoices.updateWhere({ seq: { lte: 2 } }, { status: "open" }); // a bulk change: resync
  await invoices.create({ number: "L-last", seq: 7, status: "open", amount: "99.99" });
}

describe("a member's live query", () => {
  it("keeps a filtered, ordered window of 5 equal to a fresh list through a mix of writes and a bulk resync", async () => {
    const w = await world();
    const member = await w.member();
    const reader = await member.client();
    const query: LiveQueryOptions<Row> = { filter: { status: "open" }, order: "-seq", limit: 5 };
    let rows: Row[] = [];
    const calls: number[] = [];
    const live = reader.table("invoices").liveQuery(query, (r) => { rows = r; calls.push(r.length); });
    expect(await live.ready).toEqual([]);
    await mixOfWrites(await member.client());
    const fresh = await converges(reader, query, () => rows);
    expect(fresh.map((r) => r.number)).toEqual(["L-4", "L-imp-1", "L-8", "L-last", "L-5"]);
    expect(live.rows).toEqual(fresh);
    live.close();
  });

  it("drops a row the moment it stops matching, and places an update by the query's order", async () => {
    const w = await world();
    const member = await w.member();
    let lists = 0;
    const reader = createClient<ShopTables>({ url: URL_, app: w.name, fetch: (input, init) => {
      if (/\/autocrud\/invoices(\?|$)/.test(input) && (init?.method ?? "GET") === "GET") lists++;
      return fetch(input, init);
    } });
    await reader.auth.signIn({ email: member.email, password: member.password });
    const writer = (await member.client()).table("invoices");
    const a = await writer.create({ number: "A", seq: 1, paid: false, amount: "10.00" });
    const b = await writer.create({ number: "B", seq: 2, paid: false, amount: "20.00" });
    let rows: Row[] = [];
    const live = reader.table("invoices").liveQuery({ filter: { paid: false, amount: { gte: "5" } }, order: "seq" }, (r) => (rows = r));
    await live.ready;
    expect(rows.map((r) => r.number)).toEqual(["A", "B"]);
    await writer.update(a.uid, { seq: 3 });
    await until("A after B", () => rows.map((r) => r.number).join() === "B,A");
    await writer.update(b.uid, { paid: true });
    await until("B gone", () => rows.map((r) => r.number).join() === "A");
    await writer.update(a.uid, { amount: "4.99" });
    await until("A gone (amount below 5, compared as a decimal)", () => rows.length === 0);
    await writer.update(a.uid, { amount: "5.0" });
    await until("A back", () => rows.map((r) => r.number).join() === "A");
    expect(lists).toBe(1); // every step above was judged on the client, without a refetch
    live.close();
  });

  it("holds each row with its expanded reference, as a list with expand returns it", async () => {
    const w = await world();
    const member = await w.member();
    const reader = await member.client();
    const writer = await member.client();
    const query: LiveQueryOptions<Row> = { order: "seq", expand: ["vendor"] };
    let rows: Row[] = [];
    const live = reader.table("invoices").liveQuery(query, (r) => (rows = r));
    await live.ready;
    const vendor = await writer.table("vendors").create({ name: "Acme" });
    const first = await writer.table("invoices").create({ number: "X-1", seq: 1, vendor_uid: vendor.uid });
    await writer.table("invoices").create({ number: "X-2", seq: 2 });
    await writer.table("invoices").update(first.uid, { seq: 3 });
    const fresh = await converges(reader, query, () => rows);
    expect(fresh.map((r) => [r.number, (r as Row & Expanded).expand?.vendor ?? null])).toEqual([["X-2", null], ["X-1", vendor]]);
    live.close();
  });

  it("follows filters the client cannot judge (like, text ranges) by refetching, and still converges", async () => {
    const w = await world();
    const member = await w.member();
    const reader = await member.client();
    const query: LiveQueryOptions<Row> = { filter: { number: { like: "L-1%" } }, order: "number" };
    let rows: Row[] = [];
    const live = reader.table("invoices").liveQuery(query, (r) => (rows = r));
    await live.ready;
    await mixOfWrites(await member.client());
    const fresh = await converges(reader, query, () => rows);
    expect(fresh.map((r) => r.number)).toEqual(["L-1", "L-10"]);
    live.close();
  });
});
