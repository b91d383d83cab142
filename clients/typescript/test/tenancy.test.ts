import { describe, expect, it } from "vitest";
import { createClient } from "../src/index.ts";
import { rejection, unique, URL_, world } from "./world.ts";

const TOKEN = /token=([A-Za-z0-9_-]+)/;

describe("a member running their org, through @authoric/client", () => {
  it("invites a clerk who accepts from the mail, changes and removes members, and makes a key a backend job uses", async () => {
    const w = await world();
    await w.app.roles.put("lead", { permissions: ["org.members:*", "org.keys:*", "invoices:*"], grants: ["clerk"] });
    const lead = await w.member();
    await w.app.members.set(w.org, lead.uid, ["lead"]);
    const db = await lead.client();

    const email = `${unique("clerk")}@example.com`;
    const sent = await db.org.invitations.create({ email, roles: ["clerk"] });
    expect(sent).toMatchObject({ email, roles: ["clerk"], invitedBy: lead.uid });
    expect((await db.org.invitations.list()).items.map((i) => i.uid)).toEqual([sent.uid]);
    const beyond = await rejection(db.org.invitations.create({ email: `${unique("x")}@example.com`, roles: ["lead"] }));
    expect([beyond.status, beyond.details.reason]).toEqual([403, "role_not_grantable"]);

    const mail = (await w.app.mail()).items.find((m) => m.to === email);
    const token = TOKEN.exec(String(mail?.text))?.[1];
    expect(token).toBeTruthy();
    const clerk = createClient({ url: URL_, app: w.name });
    await clerk.auth.acceptInvitation({ token: token as string, password: "a long password" });
    expect(await clerk.table("invoices").create({ number: "C-1" })).toMatchObject({ number: "C-1" });

    const members = (await db.org.members.list()).items;
    const joined = members.find((m) => m.email === email);
    expect(joined?.roles).toEqual(["clerk"]);
    expect(await db.org.members.update(joined!.user, [])).toMatchObject({ roles: [] });
    const own = await rejection(db.org.members.update(lead.uid, ["clerk"]));
    expect(own.details.reason).toBe("role_not_grantable");

    const key = await db.org.keys.create({ name: "nightly", roles: ["clerk"] });
    expect(key.key.startsWith("ak_")).toBe(true);
    const job = createClient({ url: URL_, app: w.name, apiKey: key.key });
    expect((await job.table("invoices").list()).items.map((r) => r.number)).toEqual(["C-1"]);
    expect((await db.org.keys.list()).items.map((k) => [k.uid, "key" in k])).toEqual([[key.uid, false]]);
    await db.org.keys.revoke(key.uid);
    expect((await rejection(job.table("invoices").list())).status).toBe(401);

    await db.org.members.remove(joined!.user);
    expect((await rejection(clerk.table("invoices").list())).status).toBe(401);
    await db.org.invitations.revoke((await db.org.invitations.create({ email: `${unique("y")}@example.com`, roles: [] })).uid);
    expect((await db.org.invitations.list()).items).toEqual([]);
  });
});
