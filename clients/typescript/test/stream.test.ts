import { describe, expect, it } from "vitest";
import type { ChangeEvent, Status } from "../src/index.ts";
import { until, world, type InvoicesRow, type VendorsRow } from "./world.ts";

type AnyEvent = ChangeEvent<InvoicesRow | VendorsRow>;

function recorder<E = AnyEvent>() {
  const events: E[] = [];
  const resyncs: [string, Record<string, unknown>][] = [];
  const statuses: Status[] = [];
  return {
    events, resyncs, statuses,
    opts: {
      onEvent: (e: E) => events.push(e),
      onResync: (reason: string, info: object) => resyncs.push([reason, { ...info }]),
      onStatus: (s: Status) => statuses.push(s),
    },
  };
}

describe("a member following a table's changes", () => {
  it("gets insert, update and delete as flat events with increasing ids, and the status of the stream", async () => {
    const w = await world();
    const db = await (await w.member()).client();
    const invoices = db.table("invoices");
    const r = recorder();
    const sub = invoices.subscribe(r.opts);
    await until("live", () => sub.status === "live");
    // Each row is re-read at delivery (section 5): wait for each event before the next write,
    // or the insert of a row deleted meanwhile would (rightly) be skipped.
    const row = await invoices.create({ number: "S-1" });
    await until("the insert", () => r.events.length === 1);
    await invoices.update(row.uid, { status: "paid" });
    await until("the update", () => r.events.length === 2);
    await invoices.delete(row.uid);
    await until("the delete", () => r.events.length === 3);
    expect(r.events.map((e) => [e.op, e.table, e.op === "delete" ? e.rowUid : e.row.uid]))
      .toEqual([["insert", "invoices", row.uid], ["update", "invoices", row.uid], ["delete", "invoices", row.uid]]);
    expect(r.events[1].row).toMatchObject({ status: "paid" });
    const ids = r.events.map((e) => BigInt(e.id));
    expect(ids[0] < ids[1] && ids[1] < ids[2]).toBe(true);
    expect(sub.lastEventId).toBe(r.events[2].id);
    sub.close();
    expect(r.statuses).toEqual(["connecting", "live", "closed"]);
    expect(r.resyncs).toEqual([]); // the position probe is the client's own business
  });

  it("resumes from a lastEventId it was given and gets every change since, once", async () => {
    const w = await world();
    const invoices = (await (await w.member()).client()).table("invoices");
    const first = recorder();
    const sub = invoices.subscribe(first.opts);
    await until("live", () => sub.status === "live");
    await invoices.create({ number: "R-1" });
    await until("one event", () => first.events.length === 1);
    sub.close();
    const missed = [await invoices.create({ number: "R-2" }), await invoices.create({ number: "R-3" })];
    const later = recorder();
    const resumed = invoices.subscribe({ ...later.opts, lastEventId: first.events[0].id });
    await invoices.create({ number: "R-4" });
    await until("three events", () => later.events.length === 3);
    expect(later.events.map((e) => (e.row as InvoicesRow).number)).toEqual(["R-2", "R-3", "R-4"]);
    expect(later.events[0].row?.uid).toBe(missed[0].uid);
    resumed.close();
  });

  it("follows several tables on one stream, and a bulk update reaches onResync with its table", async () => {
    const w = await world();
    const db = await (await w.member()).client();
    const r = recorder();
    const sub = db.subscribe(["invoices", "vendors"], r.opts);
    await until("live", () => sub.status === "live");
    const vendor = await db.table("vendors").create({ name: "V" });
    const invoice = await db.table("invoices").create({ number: "M-1", vendor_uid: vendor.uid, status: "open" });
    await until("two events", () => r.events.length === 2);
    expect(r.events.map((e) => [e.table, e.row?.uid])).toEqual([["vendors", vendor.uid], ["invoices", invoice.uid]]);
    expect(await db.table("invoices").updateWhere({ status: "open" }, { status: "closed" })).toEqual({ count: 1 });
    await until("a resync", () => r.resyncs.length === 1);
    expect(r.resyncs).toEqual([["bulk_change", { table: "invoices" }]]);
    sub.close();
  });

  it("is refused for a table it may not read: onError gets the 404 and the stream closes", async () => {
    const w = await world();
    const db = await (await w.member()).client();
    const errors: unknown[] = [];
    const r = recorder();
    const sub = db.table("nope" as "invoices").subscribe({ ...r.opts, onError: (e) => errors.push(e) });
    await until("closed", () => sub.status === "closed");
    expect(errors).toEqual([expect.objectContaining({ status: 404, code: "NOT_FOUND" })]);
  });
});
