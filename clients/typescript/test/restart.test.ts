import { expect, it } from "vitest";
import { AuthoricError, type ChangeEvent, type Status } from "../src/index.ts";
import { restartServer, until, world, type InvoicesRow, type VendorsRow } from "./world.ts";

type AnyEvent = ChangeEvent<InvoicesRow | VendorsRow>;

it("a member's streams and live query get every acknowledged write exactly once, in id order, while the server is killed and restarted", async () => {
  const w = await world();
  const member = await w.member();
  const reader = await member.client();
  const writer = await member.client();
  const backoff = { initial: 100, max: 1_000 };
  const single: AnyEvent[] = [];
  const multi: AnyEvent[] = [];
  const statuses: Status[] = [];
  const one = reader.table("invoices").subscribe({ onEvent: (e) => single.push(e), onStatus: (s) => statuses.push(s), backoff });
  const both = reader.subscribe(["invoices", "vendors"], { onEvent: (e) => multi.push(e), backoff });
  let liveRows: { uid: string }[] = [];
  const live = reader.table("invoices").liveQuery({ order: "-seq", limit: 10 }, (rows) => (liveRows = rows));
  await until("streams live", () => one.status === "live" && both.status === "live");
  await live.ready;

  const acknowledged: string[] = [];
  const vendors: string[] = [];
  let failures = 0;
  let restarting: Promise<void> | null = null;
  for (let seq = 0; acknowledged.length < 60; seq++) {
    if (acknowledged.length === 20 && !restarting) restarting = restartServer();
    try {
      acknowledged.push((await writer.table("invoices").create({ number: `K-${seq}`, seq })).uid);
      if (seq % 10 === 0) vendors.push((await writer.table("vendors").create({ name: `V-${seq}` })).uid);
    } catch (err) {
      // The server is down: this write was not acknowledged (it may have committed or not).
      expect(err).toBeInstanceOf(AuthoricError);
      failures++;
      await new Promise((r) => setTimeout(r, 50));
    }
    if (acknowledged.length === 40) await restarting; // the rest are written after the restart
  }
  await restarting;

  const has = (events: AnyEvent[], uid: string) => events.some((e) => e.row?.uid === uid);
  await until("every acknowledged write on both streams",
    () => acknowledged.every((u) => has(single, u) && has(multi, u)) && vendors.every((u) => has(multi, u)));
  for (const events of [single, multi]) {
    const ids = events.map((e) => BigInt(e.id));
    expect(ids.every((id, i) => i === 0 || id > ids[i - 1])).toBe(true); // increasing: no repeat
    for (const uid of acknowledged) expect(events.filter((e) => e.row?.uid === uid)).toHaveLength(1);
  }
  expect(statuses).toContain("reconnecting");
  expect(one.status).toBe("live");

  const fresh = await writer.table("invoices").list({ order: "-seq", limit: 10 });
  await until("the live query converged", () => JSON.stringify(liveRows) === JSON.stringify(fresh.items));
  expect(liveRows.map((r) => r.uid)).toEqual(fresh.items.map((r) => r.uid));
  one.close();
  both.close();
  live.close();
  console.log(`${acknowledged.length} acknowledged writes, ${failures} refused while the server was down`);
});
