import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { createClient } from "../src/index.ts";
import { rejection, URL_, world } from "./world.ts";

describe("a signed-in member using a table", () => {
  it("creates, reads, lists by filter and order page by page, updates and deletes rows", async () => {
    const w = await world();
    const db = await (await w.member()).client();
    const invoices = db.table("invoices");
    const vendor = await db.table("vendors").create({ name: "Acme" });
    const made = [];
    for (let i = 1; i <= 5; i++) {
      made.push(await invoices.create({ number: `INV-${i}`, status: i % 2 ? "received" : "paid", amount: `${i}00.50`, seq: i, vendor_uid: vendor.uid }));
    }
    expect(made[0]).toMatchObject({ number: "INV-1", amount: "100.50", seq: 1, vendor_uid: vendor.uid });
    expect(await invoices.get(made[1].uid)).toEqual(made[1]);

    const first = await invoices.list({ filter: { status: "received" }, order: "-seq", limit: 2 });
    expect(first.items.map((r) => r.number)).toEqual(["INV-5", "INV-3"]);
    const second = await invoices.list({ filter: { status: "received" }, order: "-seq", limit: 2, after: first.next });
    expect(second.items.map((r) => r.number)).toEqual(["INV-1"]);
    expect(second.next).toBeNull();
    const ranged = await invoices.list({ filter: { or: [{ seq: { gte: 4 } }, { number: { in: ["INV-1"] } }] }, order: "seq" });
    expect(ranged.items.map((r) => r.number)).toEqual(["INV-1", "INV-4", "INV-5"]);

    const updated = await invoices.update(made[0].uid, { status: "paid", amount: "1.00" });
    expect(updated).toMatchObject({ uid: made[0].uid, status: "paid", amount: "1.00" });
    await invoices.delete(made[0].uid);
    expect((await rejection(invoices.get(made[0].uid))).code).toBe("NOT_FOUND");
  });

  it("gets a reference expanded into the referenced row on read, list, create and update, and counts what a filter matches", async () => {
    const w = await world();
    const db = await (await w.member()).client();
    const invoices = db.table("invoices");
    const acme = await db.table("vendors").create({ name: "Acme" });
    const made = await invoices.create({ number: "E-1", status: "received", seq: 1, vendor_uid: acme.uid }, { expand: ["vendor"] });
    expect(made.expand.vendor).toEqual(acme);
    expect((await invoices.update(made.uid, { seq: 2 }, { expand: ["vendor"] })).expand.vendor).toEqual(acme);
    expect((await invoices.get(made.uid, { expand: ["vendor"] })).expand).toEqual({ vendor: acme });
    for (let i = 3; i <= 6; i++) await invoices.create({ number: `E-${i}`, status: i % 2 ? "received" : "paid", seq: i });

    const page = await invoices.list({ filter: { status: "received" }, order: "seq", limit: 2, expand: ["vendor"], count: true });
    expect(page.items.map((r) => [r.number, r.vendor_uid, r.expand.vendor?.name ?? null]))
      .toEqual([["E-1", acme.uid, "Acme"], ["E-3", null, null]]);
    expect(page.total).toBe(3); // every matching row, not the page's two
    const rest = await invoices.list({ filter: { status: "received" }, order: "seq", limit: 2, after: page.next, count: "exact" });
    expect([rest.items.map((r) => r.number), rest.total]).toEqual([["E-5"], 3]);
    expect((await invoices.list({ count: true })).total).toBe(5);
    expect((await invoices.list({ filter: { seq: { gt: 100 } }, count: true })).total).toBe(0);
    expect((await invoices.list()).total).toBeUndefined();

    const notReference = await rejection(invoices.list({ expand: ["number" as "vendor"] }));
    expect([notReference.status, notReference.code]).toEqual([400, "BAD_REQUEST"]);
  });

  it("updates and deletes by filter, and imports CSV all or nothing", async () => {
    const w = await world();
    const invoices = (await (await w.member()).client()).table("invoices");
    expect(await invoices.importCsv("number,status,seq\nA-1,received,1\nA-2,received,2\nA-3,paid,3\n")).toEqual({ inserted: 3 });
    expect(await invoices.updateWhere({ status: "received" }, { status: "checked" })).toEqual({ count: 2 });
    expect((await invoices.list({ filter: { status: "checked" } })).items).toHaveLength(2);
    const bad = await rejection(invoices.importCsv("number,seq\nB-1,1\nB-2,two\n"));
    expect(bad.status).toBe(422);
    expect(bad.code).toBe("VALIDATION_FAILED");
    expect(bad.details.rows).toEqual([expect.objectContaining({ line: 3, column: "seq" })]);
    expect((await invoices.list()).items).toHaveLength(3);
    expect(await invoices.deleteWhere({ seq: { lte: 2 } })).toEqual({ count: 2 });
    expect((await invoices.list()).items.map((r) => r.number)).toEqual(["A-3"]);
  });

  it("gets each of the contract's errors as an AuthoricError with status, code and details", async () => {
    const w = await world();
    const member = await w.member();
    const db = await member.client();
    const invoices = db.table("invoices");
    await invoices.create({ number: "X-1" });

    const missing = await rejection(invoices.create({ status: "no number" }));
    expect([missing.status, missing.code]).toEqual([422, "VALIDATION_FAILED"]);
    const wrongType = await rejection(invoices.create({ number: "X-2", seq: "many" as unknown as number }));
    expect([wrongType.status, wrongType.code]).toEqual([422, "VALIDATION_FAILED"]);
    const taken = await rejection(invoices.create({ number: "X-1" }));
    expect([taken.status, taken.code]).toEqual([409, "CONFLICT"]);
    const badFilter = await rejection(invoices.list({ filter: { seq: { near: 3 } } as never }));
    expect([badFilter.status, badFilter.code]).toEqual([400, "BAD_REQUEST"]);
    const noFilter = await rejection(invoices.deleteWhere({}));
    expect([noFilter.status, noFilter.code]).toEqual([400, "BAD_REQUEST"]);
    const unknownTable = await rejection(db.table("nope" as "invoices").list());
    expect([unknownTable.status, unknownTable.code]).toEqual([404, "NOT_FOUND"]);
    expect(missing.message).toBeTruthy();

    const stranger = createClient({ url: URL_, app: w.name });
    const wrong = await rejection(stranger.auth.signIn({ email: member.email, password: "wrong password" }));
    expect([wrong.status, wrong.code]).toEqual([401, "UNAUTHENTICATED"]);
    const anonymous = await rejection(stranger.table("invoices").list());
    expect([anonymous.status, anonymous.code]).toEqual([401, "UNAUTHENTICATED"]);
    const offline = await rejection(createClient({ url: "http://127.0.0.1:9", app: w.name }).table("x").list());
    expect([offline.status, offline.code]).toEqual([0, "NETWORK_ERROR"]);
  });

  it("gets NETWORK_ERROR, not a bare TypeError, when a server dies halfway through its answer", async () => {
    // A real socket that sends a 200's headers and part of its body, then closes: what a
    // client sees when the server is killed mid-response.
    const server: Server = createServer((_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": "100" });
      res.write('{"items": [', () => res.socket?.destroy());
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    try {
      const { port } = server.address() as AddressInfo;
      const cut = await rejection(createClient({ url: `http://127.0.0.1:${port}`, app: "shop" }).table("x").list());
      expect([cut.status, cut.code]).toEqual([0, "NETWORK_ERROR"]);
    } finally {
      await new Promise((done) => server.close(done));
    }
  });

  it("signs out: the refresh token is revoked and the client holds no session", async () => {
    const w = await world();
    const db = await (await w.member()).client();
    const refreshToken = db.auth.session!.refreshToken;
    await db.auth.signOut();
    expect(db.auth.session).toBeNull();
    const res = await fetch(`${URL_}/${w.name}/auth/refresh`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ refresh_token: refreshToken }),
    });
    expect(res.status).toBe(401);
  });
});
