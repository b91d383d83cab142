import { describe, expect, it } from "vitest";
import type { ChangeEvent } from "../src/admin.ts";
import type { OrgRow } from "../src/admin.ts";
import { createClient } from "../src/index.ts";
import { admin, rejection, until, URL_, world } from "./world.ts";

describe("the platform admin, through @authoric/client/admin", () => {
  it("reads and writes rows of every org, imports into one, and hears every org on the operator's feed", async () => {
    const w = await world();
    const other = (await w.app.orgs.create({ name: "Southwind" })).uid;
    const rows = w.app.rows("invoices");
    const heard: ChangeEvent<OrgRow>[] = [];
    const feed = rows.subscribe({ onEvent: (e) => heard.push(e) });
    await until("feed live", () => feed.status === "live");
    const a = await rows.create({ org: w.org, number: "N-1", seq: 1 });
    const b = await rows.create({ org: other, number: "S-1", seq: 2 });
    expect([a.org, b.org]).toEqual([w.org, other]);
    expect(await rows.importCsv("number,seq\nS-2,3\n", other)).toEqual({ inserted: 1 });
    expect((await rows.list({ org: other, order: "seq" })).items.map((r) => r.number)).toEqual(["S-1", "S-2"]);
    expect((await rows.list({ order: "seq" })).items).toHaveLength(3);
    expect(await rows.list({ org: other, limit: 1, count: true })).toMatchObject({ total: 2 });
    const estimate = await rows.list({ limit: 1, count: "estimate" });
    expect([typeof estimate.total, estimate.estimated]).toEqual(["number", true]);
    expect(await rows.update(a.uid, { status: "paid" })).toMatchObject({ status: "paid", org: w.org });
    expect((await rows.get(b.uid)).number).toBe("S-1");
    await until("four events", () => heard.length === 4); // rows are re-read at delivery
    await rows.delete(b.uid);
    await until("five events", () => heard.length === 5);
    expect(heard.map((e) => [e.op, e.op === "delete" ? e.rowUid : e.row.org]))
      .toEqual([["insert", w.org], ["insert", other], ["insert", other], ["update", w.org], ["delete", b.uid]]);
    feed.close();
    expect((await rejection(rows.create({ org: w.org, seq: 4 }))).code).toBe("VALIDATION_FAILED");
  });

  it("lists members and memberships, previews a role, impersonates read-only, and reads the audit log", async () => {
    const w = await world();
    const member = await w.member();
    const page = await w.app.orgs.members(w.org, { limit: 10 });
    expect(page.items).toEqual([{ org: w.org, user: member.uid, email: member.email, roles: ["clerk"],
                                  joinedAt: expect.stringMatching(/Z$/) }]);
    expect((await w.app.users.memberships(member.uid)).items).toEqual([{ org: w.org, orgName: "Northwind", roles: ["clerk"] }]);
    await w.app.rows("invoices").create({ org: w.org, number: "P-1", status: "draft" });
    const preview = await w.app.roles.preview("clerk", {
      draft: { permissions: ["invoices:read_list", "invoices:read"], rowPolicies: { invoices: { status: { ne: "draft" } } }, redact: {} },
      user: member.uid, org: w.org, table: "invoices",
    });
    expect([preview.saved.visible, preview.draft.visible, preview.lost.length]).toEqual([1, 0, 1]);
    expect(preview.actionsRevoked).toEqual(expect.arrayContaining(["create", "update", "delete"]));

    const pair = await w.app.impersonate({ user: member.uid, org: w.org, ttl: 300 });
    const viewer = createClient({ url: URL_, app: w.name });
    viewer.auth.setSession(pair);
    expect((await viewer.table("invoices").list()).items.map((r) => r.number)).toEqual(["P-1"]);
    const refused = await rejection(viewer.table("invoices").create({ number: "P-2" }));
    expect([refused.status, refused.code, refused.details.reason]).toEqual([403, "FORBIDDEN", "impersonation_read_only"]);

    const audit = await w.app.audit({ limit: 100 });
    expect(audit.items.map((e) => e.action)).toEqual(expect.arrayContaining(["impersonate"]));
    expect(JSON.stringify(audit.items)).not.toContain(pair.access_token);
  });

  it("changes a table's schema in one transaction, builds an index, and manages apps", async () => {
    const w = await world();
    // (renameColumns and alterColumns are typed too; this server does not have them yet.)
    const changed = await w.app.tables.update("vendors", { addColumns: [{ name: "city", type: "text" }] });
    expect(changed.columns.map((c) => c.name)).toEqual(["name", "city"]);
    const bad = await rejection(w.app.tables.update("vendors", { addColumns: [{ name: "zip", type: "text" }], dropColumns: ["nope"] }));
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect((await w.app.tables.get("vendors")).columns.map((c) => c.name)).toEqual(["name", "city"]);

    const index = await w.app.indexes.put("invoices", "by_seq", { columns: ["-seq"] });
    expect(index).toMatchObject({ name: "by_seq", state: "building" });
    let state = index.state;
    for (const deadline = Date.now() + 60_000; state !== "ready" && Date.now() < deadline;) {
      state = (await w.app.indexes.get("invoices", "by_seq")).state;
      if (state !== "ready") await new Promise((r) => setTimeout(r, 200));
    }
    expect(state).toBe("ready");
    expect((await w.app.indexes.list("invoices")).items.map((i) => i.name)).toContain("by_seq");
    await w.app.indexes.delete("invoices", "by_seq");

    expect((await admin.apps.list()).items.map((a) => a.name)).toContain(w.name);
    expect((await admin.apps.get(w.name)).settings.allowedOrigins).toEqual([]);
    await w.app.tables.delete("invoices");
    expect((await w.app.tables.list()).items.map((t) => t.name)).toEqual(["vendors"]);
    await admin.apps.delete(w.name);
    expect((await rejection(admin.apps.get(w.name))).code).toBe("NOT_FOUND");
  });
});
