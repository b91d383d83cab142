import { afterEach, describe, expect, it } from "vitest";
import { createClient, type ChangeEvent, type Status } from "../src/index.ts";
import { setClock, until, URL_, world, type ShopTables } from "./world.ts";

/** A fetch that counts what it sends and what comes back. */
function counting() {
  const seen = { refreshes: 0, expired: 0, requests: 0 };
  const fetchFn = async (input: string, init?: RequestInit) => {
    if (input.includes("/auth/refresh")) seen.refreshes++;
    else seen.requests++;
    const res = await fetch(input, init);
    if (res.status === 401) seen.expired++;
    return res;
  };
  return { seen, fetchFn };
}

afterEach(() => setClock(0));

describe("a signed-in member whose access token runs out", () => {
  it("makes twenty calls just after expiry: one refresh serves them all, and the session lives on", async () => {
    const w = await world({ accessTokenTtl: 60 });
    const member = await w.member();
    const { seen, fetchFn } = counting();
    const db = createClient<ShopTables>({ url: URL_, app: w.name, fetch: fetchFn });
    await db.auth.signIn({ email: member.email, password: member.password });
    const invoices = db.table("invoices");
    await invoices.create({ number: "T-1" });
    setClock(61); // the server's clock: every token it issued so far has expired
    const pages = await Promise.all(Array.from({ length: 20 }, () => invoices.list()));
    expect(pages.every((p) => p.items.length === 1)).toBe(true);
    expect(seen.refreshes).toBe(1); // a second refresh would have revoked the family
    expect(seen.expired).toBe(20);
    // The family survives: the rotated refresh token refreshes again, and calls go on.
    await db.auth.refresh();
    expect(seen.refreshes).toBe(2);
    expect((await invoices.list()).items).toHaveLength(1);
  });

  it("refreshes once, before any call fails, when the token enters the last tenth of its life", async () => {
    const w = await world({ accessTokenTtl: 600 });
    const member = await w.member();
    const { seen, fetchFn } = counting();
    let now = Date.now();
    const db = createClient<ShopTables>({ url: URL_, app: w.name, fetch: fetchFn, now: () => now });
    await db.auth.signIn({ email: member.email, password: member.password });
    const before = db.auth.session!.accessToken;
    const changes: unknown[] = [];
    db.auth.onChange((s) => changes.push(s));
    now += 539_000; // 89.8% of its life: not yet
    await Promise.all(Array.from({ length: 10 }, () => db.table("invoices").list()));
    expect(seen.refreshes).toBe(0);
    now += 2_000; // 90.2%
    await Promise.all(Array.from({ length: 10 }, () => db.table("invoices").list()));
    expect(seen.refreshes).toBe(1);
    expect(seen.expired).toBe(0);
    expect(db.auth.session!.accessToken).not.toBe(before);
    expect(changes).toHaveLength(1);
  });

  it("follows a stream through reauth: refresh, reconnect from its last id, nothing missed or doubled", async () => {
    // The stream's reauth comes on the server's real clock: a 10 s token, and nothing is
    // asserted about how soon after expiry the frame came (docs/testing.md).
    const w = await world({ accessTokenTtl: 10 });
    const member = await w.member();
    const { seen, fetchFn } = counting();
    const db = createClient<ShopTables>({ url: URL_, app: w.name, fetch: fetchFn });
    await db.auth.signIn({ email: member.email, password: member.password });
    const writer = await member.client(); // its own session: its refreshes are not counted
    const statuses: Status[] = [];
    const events: ChangeEvent<ShopTables["invoices"]>[] = [];
    const first = db.auth.session!.accessToken;
    const sub = db.table("invoices").subscribe({ onEvent: (e) => events.push(e), onStatus: (s) => statuses.push(s) });
    await until("live", () => sub.status === "live");
    const written: string[] = [];
    // Write until the stream has been through reauth and is live again, then once more.
    while (!statuses.includes("reconnecting") || sub.status !== "live") {
      written.push((await writer.table("invoices").create({ number: `W-${written.length}` })).uid);
      await new Promise((r) => setTimeout(r, 200));
    }
    written.push((await writer.table("invoices").create({ number: "W-last" })).uid);
    await until("every write", () => events.length >= written.length);
    expect(events.map((e) => e.row?.uid)).toEqual(written);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    expect(db.auth.session!.accessToken).not.toBe(first);
    expect(seen.refreshes).toBeGreaterThanOrEqual(1);
    expect(statuses.slice(0, 4)).toEqual(["connecting", "live", "reconnecting", "live"]);
    sub.close();
  });
});
