"""Webhook delivery (contract section 8): throughput, lag and server CPU per delivery.

    .venv/bin/python -m bench.webhooks                   # both scenarios
    .venv/bin/python -m bench.webhooks --only one        # one webhook only

On a fresh embedded PostgreSQL, one `authoric serve` process (AUTHORIC_WORKERS=1, private
targets allowed), receivers on loopback in this process (bench.chaos's HookReceiver: HTTP/1.1
keep-alive, answers 200 at once).

- one: one webhook (the operator's view of one org), REST creates at `--rate` (500/s) for
  `--seconds`: deliveries/s, lag p50/p99 (from the change's write to its arrival), and server
  CPU per delivery: (server CPU with the webhook - server CPU of the same writes with nothing
  listening) / deliveries; the same for one SSE stream of the operator's feed instead of the
  webhook. Then the backlog: the webhook paused while `--backlog` rows are written, resumed,
  and timed until the last arrives: deliveries/s to one receiver, in order.
- many: `--hooks` (100) webhooks over `--orgs` (50) orgs, each judged as one of 3 roles (one
  with a row policy, one with redaction), REST creates at `--many-rate` (200/s) spread over
  the orgs: lag p50/p99 over every delivery.
Everything shares this machine's cores; figures are for comparison on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.chaos import HookReceiver
from bench.harness import Database, Server, database, running_server, tree_cpu_seconds

COLUMNS = [{"name": "number", "type": "text", "required": True},
           {"name": "status", "type": "text", "default": "open"},
           {"name": "amount", "type": "numeric"}]
ROLES = {
    "clerk": {"permissions": ["events:*"]},
    "viewer": {"permissions": ["events:read_list", "events:read"]},
    "auditor": {"permissions": ["events:read_list", "events:read"],
                "redact": {"events": ["amount"]}},
    "reviewer": {"permissions": ["events:read_list", "events:read"],
                 "rowPolicies": {"events": {"status": {"ne": "draft"}}}},
}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class App:
    name: str
    admin: httpx.Client
    orgs: list[str]
    clerks: list[str]  # one clerk token per org

    def hook(self, url: str, org: str | None, role: str | None) -> str:
        made = self.admin.post(f"/admin/apps/{self.name}/webhooks",
                               json={"url": url, "tables": ["events"], "org": org, "role": role})
        made.raise_for_status()
        return str(made.json()["uid"])

    def set_status(self, uid: str, status: str) -> None:
        self.admin.patch(f"/admin/apps/{self.name}/webhooks/{uid}",
                         json={"status": status}).raise_for_status()


@contextlib.contextmanager
def app(server: Server, orgs: int, name: str) -> Iterator[App]:
    with httpx.Client(base_url=server.url, timeout=60,
                      headers={"Authorization": f"Bearer {server.admin_token}"}) as admin:
        admin.post("/admin/apps", json={"name": name}).raise_for_status()
        base = f"/admin/apps/{name}"
        admin.patch(base, json={"settings": {"accessTokenTtl": 86_400}}).raise_for_status()
        admin.post(f"{base}/tables", json={"name": "events", "columns": COLUMNS}).raise_for_status()
        for role, body in ROLES.items():
            admin.put(f"{base}/roles/{role}", json={"rowPolicies": {}, "redact": {}, **body}
                      ).raise_for_status()
        org_uids, clerks = [], []
        for i in range(orgs):
            org = admin.post(f"{base}/orgs", json={"name": f"org{i}"}).json()["uid"]
            user = admin.post(f"{base}/users", json={"email": f"c{i}@example.com",
                                                     "password": "correct horse"}).json()
            admin.put(f"{base}/orgs/{org}/members/{user['uid']}", json={"roles": ["clerk"]})
            token = admin.post(f"/{name}/auth/token", json={
                "email": f"c{i}@example.com", "password": "correct horse", "org": org}).json()
            org_uids.append(org)
            clerks.append(token["access_token"])
        yield App(name, admin, org_uids, clerks)


async def write(server: Server, world: App, rate: float, seconds: float, start: int = 0) -> int:
    """REST creates at `rate`/s for `seconds`, round-robin over the orgs' clerks: how many."""
    total = int(rate * seconds)
    path = f"/{world.name}/autocrud/events"
    began = time.monotonic()
    counter = itertools.count(start)
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
    async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as client:
        # 32 senders, each taking the next write when its time comes (thousands of requests
        # queued in httpx's pool at once cost the load generator quadratic CPU).
        async def sender() -> None:
            for n in counter:
                if n - start >= total:
                    return
                await asyncio.sleep(max(0.0, began + (n - start) / rate - time.monotonic()))
                token = world.clerks[n % len(world.clerks)]
                response = await client.post(
                    path, json={"number": f"n{n}", "amount": "1.50",
                                "status": "draft" if n % 5 == 0 else "open"},
                    headers={"Authorization": f"Bearer {token}"})
                response.raise_for_status()

        await asyncio.gather(*(sender() for _ in range(32)))
    return total


async def until_received(hooks: list[HookReceiver], count: int, limit: float = 120) -> float:
    began = time.monotonic()
    while sum(len(h.first_seen()) for h in hooks) < count:
        if time.monotonic() - began > limit:
            break
        await asyncio.sleep(0.02)
    return time.monotonic() - began


async def stream_frames(server: Server, world: App, counted: list[int],
                        stop: asyncio.Event) -> None:
    """The operator's feed of the table (one SSE stream), counting data frames."""
    path = f"/admin/apps/{world.name}/tables/events/rows/subscribe"
    async with httpx.AsyncClient(base_url=server.url, timeout=None) as client, client.stream(
            "GET", path, headers={"Authorization": f"Bearer {server.admin_token}",
                                  "Accept": "text/event-stream"}) as response:
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                counted[0] += 1
            if stop.is_set():
                return


async def one_webhook(server: Server, db: Database, args: argparse.Namespace) -> None:
    with app(server, 1, "one") as world:
        cpu = lambda: tree_cpu_seconds(server.pid)  # noqa: E731
        # The writes alone.
        before = cpu()
        n = await write(server, world, args.rate, args.seconds)
        base = (cpu() - before) / n
        # The same writes with one webhook.
        hook = HookReceiver("one", ("A",))
        await hook.start()
        uid = world.hook(hook.url, world.orgs[0], None)
        before, began = cpu(), time.monotonic()
        n = await write(server, world, args.rate, args.seconds, start=10_000_000)
        await until_received([hook], n)
        took = time.monotonic() - began
        per_hook = (cpu() - before) / n - base
        lags = list(hook.lags)
        print(f"one webhook, {args.rate:.0f} writes/s for {args.seconds:.0f} s: {n} deliveries "
              f"({len(hook.first_seen()) / took:.0f}/s), lag p50 {pct(lags, .5) * 1000:.0f} ms "
              f"p99 {pct(lags, .99) * 1000:.0f} ms, out of order {hook.out_of_order()}; server "
              f"CPU per write alone {base * 1000:.2f} ms, per delivery "
              f"{per_hook * 1000:.2f} ms")
        world.set_status(uid, "paused")
        # The same writes with one stream of the operator's feed instead.
        counted, stop = [0], asyncio.Event()
        reading = asyncio.create_task(stream_frames(server, world, counted, stop))
        await asyncio.sleep(1.0)
        before = cpu()
        n = await write(server, world, args.rate, args.seconds, start=20_000_000)
        deadline = time.monotonic() + 60
        while counted[0] < n and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        per_frame = (cpu() - before) / n - base
        stop.set()
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reading
        print(f"one operator stream instead: {counted[0]} frames, server CPU per frame "
              f"{per_frame * 1000:.2f} ms")
        # The backlog: written while paused (the stream's and these), then resumed.
        await write(server, world, args.rate, args.backlog / args.rate, start=30_000_000)
        waiting = n + args.backlog
        had = len(hook.first_seen())
        before, began = cpu(), time.monotonic()
        world.set_status(uid, "active")
        took = await until_received([hook], had + waiting, limit=600)
        sent = len(hook.first_seen()) - had
        print(f"backlog of {waiting}: {sent} delivered in {took:.1f} s = {sent / took:.0f} "
              f"deliveries/s to one receiver, out of order {hook.out_of_order()}, server CPU "
              f"per delivery {(cpu() - before) / max(sent, 1) * 1000:.2f} ms")
        await hook.stop()


async def many_webhooks(server: Server, db: Database, args: argparse.Namespace) -> None:
    with app(server, args.orgs, "many") as world:
        receivers = []
        roles = ["viewer", "auditor", "reviewer"]
        for i in range(args.hooks):
            hook = HookReceiver(f"h{i}", ("A",))
            await hook.start()
            world.hook(hook.url, world.orgs[i % args.orgs], roles[i % 3])
            receivers.append(hook)
        await asyncio.sleep(3)  # every webhook leased
        before, began = tree_cpu_seconds(server.pid), time.monotonic()
        n = await write(server, world, args.many_rate, args.seconds)
        expected = sum(1 for k in range(n) for i in range(args.hooks)
                       if k % args.orgs == i % args.orgs and not (roles[i % 3] == "reviewer"
                                                                  and k % 5 == 0))
        await until_received(receivers, expected)
        took = time.monotonic() - began
        lags = [x for h in receivers for x in h.lags]
        got = sum(len(h.first_seen()) for h in receivers)
        print(f"{args.hooks} webhooks over {args.orgs} orgs, 3 roles, {args.many_rate:.0f} "
              f"writes/s for {args.seconds:.0f} s: {got} of {expected} deliveries "
              f"({got / took:.0f}/s), lag p50 {pct(lags, .5) * 1000:.0f} ms p99 "
              f"{pct(lags, .99) * 1000:.0f} ms, out of order "
              f"{sum(h.out_of_order() for h in receivers)}, server CPU "
              f"{(tree_cpu_seconds(server.pid) - before) / took * 100:.0f}% of a core")
        for hook in receivers:
            await hook.stop()


async def main_async(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="authoric-bench-webhooks-"))
    env = {"AUTHORIC_WEBHOOK_ALLOW_PRIVATE": "true", "AUTHORIC_WORKERS": "1"}
    with database(work) as db, running_server(work, db, env) as server:
        if args.only in (None, "one"):
            await one_webhook(server, db, args)
        if args.only in (None, "many"):
            await many_webhooks(server, db, args)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", choices=("one", "many"))
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--backlog", type=int, default=5000)
    parser.add_argument("--hooks", type=int, default=100)
    parser.add_argument("--orgs", type=int, default=50)
    parser.add_argument("--many-rate", type=float, default=200.0)
    args = parser.parse_args(argv)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
