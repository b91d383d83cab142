/** Run against a server started with a cap of one stream per user and a short lease TTL
 * (tests/clients/test_typescript_client.py passes the TTL as AUTHORIC_TEST_LEASE_TTL). */

import { describe, expect, it } from "vitest";
import { createClient, type FetchLike, type Status } from "../src/index.ts";
import { until, URL_, world, type ShopTables } from "./world.ts";

const LEASE_TTL = Number(process.env.AUTHORIC_TEST_LEASE_TTL);

interface Attempt {
  sent: number;
  answered: number;
  status: number;
  retryAfter: number | null;
}

/** A fetch that notes when each stream request was sent and answered, and how. */
function noting(attempts: Attempt[]): FetchLike {
  return async (input, init) => {
    const sent = performance.now();
    const res = await fetch(input, init);
    if (input.includes("/subscribe")) {
      const retryAfter = res.headers.get("Retry-After");
      attempts.push({ sent, answered: performance.now(), status: res.status, retryAfter: retryAfter === null ? null : Number(retryAfter) });
    }
    return res;
  };
}

describe("a member opening one stream more than the server's cap allows", () => {
  it("waits what each 429's Retry-After says, not its own backoff, and connects once the slot frees", async () => {
    expect(LEASE_TTL).toBeGreaterThan(0);
    const w = await world();
    const member = await w.member();
    const first = await member.client();
    const attempts: Attempt[] = [];
    const second = createClient<ShopTables>({ url: URL_, app: w.name, fetch: noting(attempts) });
    await second.auth.signIn({ email: member.email, password: member.password });

    const open = first.table("invoices").subscribe();
    await until("the first stream live", () => open.status === "live");
    const statuses: Status[] = [];
    // A backoff of at most 50 ms: a client that used it on a 429 would try again many times a second.
    const heard: string[] = [];
    const refused = second.table("invoices").subscribe({
      backoff: { initial: 10, max: 50 }, onStatus: (s) => statuses.push(s), onEvent: (e) => heard.push(e.op),
    });
    await until("the 429", () => attempts.length > 0);
    expect(attempts[0].status).toBe(429);
    // The server's Retry-After: when the open stream's lease could lapse, 1 s to the lease TTL.
    expect(attempts[0].retryAfter).toBeGreaterThanOrEqual(1);
    expect(attempts[0].retryAfter).toBeLessThanOrEqual(LEASE_TTL);

    open.close(); // frees the one slot
    await until("the second stream live", () => refused.status === "live");
    expect(attempts.at(-1)!.status).toBe(200);
    const waits = attempts.slice(0, -1).map((a, i) => {
      expect([a.status, typeof a.retryAfter]).toEqual([429, "number"]);
      return { said: a.retryAfter! * 1000, waited: attempts[i + 1].sent - a.answered };
    });
    for (const { said, waited } of waits) expect(waited).toBeGreaterThanOrEqual(said - 50); // timers may fire a ms early
    expect(statuses).toEqual(["connecting", "reconnecting", "live"]);

    // Connected for good: it hears a write like any stream.
    await first.table("invoices").create({ number: "C-1" });
    await until("the insert", () => heard.length === 1);
    refused.close();
  });
});
