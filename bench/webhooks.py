"""Webhook delivery (contract section 8): throughput, lag and server CPU per delivery.

    .venv/bin/python -m bench.webhooks                   # both scenarios
    .venv/bin/python -m bench.webhooks --only one        # one webhook only

On a fresh embedded PostgreSQL, one `authoric serve` process (`--workers`: 1, private
targets allowed), receivers on loopback in a process of their own (bench.chaos's HookReceiver:
HTTP/1.1 keep-alive, answers 200 at once). In this process, with the writers, a receiver
answered late whenever the writers had the CPU, and one webhook's deliveries, one at a time,
went at the pace of those answers.

- one: one webhook (the operator's view of one org), REST creates at `--rate` (500/s) for
  `--seconds`: deliveries/s, lag p50/p99 (from the change's write to its arrival), and server
  CPU per delivery: (server CPU with the webhook - server CPU of the same writes with nothing
  listening) / deliveries; the same for one SSE stream of the operator's feed instead of the
  webhook. Then the backlog: the webhook paused while `--backlog` rows are written, resumed,
  and timed until the last arrives: deliveries/s to one receiver, in order.
- many: `--hooks` (100) webhooks over `--orgs` (50) orgs, each judged as one of 3 roles (one
  with a row policy, one with redaction), REST creates at `--many-rate` (200/s) spread over
  the orgs: lag p50/p99 over every delivery; and one member stream per org, whose lag is
  measured first with no webhook, then while the webhooks deliver the same writes. With
  `--streams roles`, the streams are instead one per webhook, of a member of its org holding
  its role: each webhook's read class then has a stream, whose verdicts it reuses
  (realtime/verdicts.py); the printout gives the changes judged `shared` and `own`.
Everything shares this machine's cores; figures are for comparison on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import multiprocessing
import multiprocessing.connection
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.chaos import HookReceiver, _epoch
from bench.harness import Database, Server, database, running_server, tree_cpu_seconds
from bench.sse_clients import RawHttp, SseClient, note_control, open_subscribers, subscribe_request

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

    def member(self, org: int, role: str) -> str:
        """An access token of a new member of org number `org` holding `role`."""
        base = f"/admin/apps/{self.name}"
        email = f"{role}{org}@example.com"
        user = self.admin.post(f"{base}/users", json={"email": email,
                                                      "password": "correct horse"}).json()
        self.admin.put(f"{base}/orgs/{self.orgs[org]}/members/{user['uid']}",
                       json={"roles": [role]}).raise_for_status()
        return str(self.admin.post(f"/{self.name}/auth/token", json={
            "email": email, "password": "correct horse", "org": self.orgs[org]}
        ).json()["access_token"])

    def hook(self, url: str, org: str | None, role: str | None) -> str:
        made = self.admin.post(f"/admin/apps/{self.name}/webhooks",
                               json={"url": url, "tables": ["events"], "org": org, "role": role})
        made.raise_for_status()
        return str(made.json()["uid"])

    def failures(self, uid: str) -> str:
        """The webhook's failed attempts in its newest 1,000 log entries, by error."""
        log = self.admin.get(f"/admin/apps/{self.name}/webhooks/{uid}/deliveries",
                             params={"limit": "1000"})
        log.raise_for_status()
        errors = [d["error"] for d in log.json()["items"] if d["error"]]
        return f"{len(errors)} failed attempts" + (f" ({sorted(set(errors))})" if errors else "")

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


WRITTEN: list[float] = []  # the rate each `write` reached (a loaded machine falls short)


async def write(server: Server, world: App, rate: float, seconds: float, start: int = 0) -> int:
    """REST creates at `rate`/s for `seconds`, round-robin over the orgs' clerks: how many.
    Over 32 raw keep-alive connections (bench.sse_clients.RawHttp): with httpx's client the
    load generator, not the server, set the pace (about 130 of 200 writes/s)."""
    total = int(rate * seconds)
    path = f"/{world.name}/autocrud/events"
    began = time.monotonic()
    counter = itertools.count(start)

    # 32 senders, each taking the next write when its time comes.
    async def sender() -> None:
        conn = RawHttp(server.host, server.port)
        try:
            for n in counter:
                if n - start >= total:
                    return
                await asyncio.sleep(max(0.0, began + (n - start) / rate - time.monotonic()))
                body = json.dumps({"number": f"n{n}", "amount": "1.50",
                                   "status": "draft" if n % 5 == 0 else "open"}).encode()
                status, _ = await conn.request("POST", path, world.clerks[n % len(world.clerks)],
                                               body)
                if status != 201:
                    raise SystemExit(f"a write answered HTTP {status}")
        finally:
            await conn.close()

    await asyncio.gather(*(sender() for _ in range(32)))
    WRITTEN.append(total / (time.monotonic() - began))
    return total


class Hooks:
    """`n` receivers in a child process (spawned: nothing of this process's loop goes with
    it), asked over a pipe how many distinct deliveries each has, and at the end for their
    lags and order."""

    def __init__(self, n: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipe, child = context.Pipe()
        self.process = context.Process(target=_serve_hooks, args=(child, n), daemon=True)
        self.process.start()
        self.urls: list[str] = self.pipe.recv()

    def ask(self, what: str) -> Any:
        self.pipe.send(what)
        return self.pipe.recv()

    def counts(self) -> list[int]:
        return list(self.ask("counts"))

    def received(self) -> int:
        return sum(self.counts())

    def results(self) -> tuple[list[float], int]:
        """(every first delivery's lag in seconds, deliveries out of order)"""
        lags, _, out_of_order = self.ask("results")
        return list(lags), int(out_of_order)

    def over_time(self, slices: int) -> str:
        """Lag p99 (ms) in each of `slices` equal spans of the deliveries' arrivals: a tail
        spread over the run, or gathered at its start or in one span."""
        lags, arrivals, _ = self.ask("results")
        if not lags:
            return "-"
        first, last = min(arrivals), max(arrivals)
        width = (last - first) / slices or 1.0
        spans: list[list[float]] = [[] for _ in range(slices)]
        for lag, at in zip(lags, arrivals, strict=True):
            spans[min(slices - 1, int((at - first) / width))].append(lag)
        return "/".join(f"{pct(span, .99) * 1000:.0f}" if span else "-" for span in spans)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.pipe.send("stop")
        self.process.join(10)


def _serve_hooks(pipe: multiprocessing.connection.Connection, n: int) -> None:
    async def serve() -> None:
        hooks = [HookReceiver(f"h{i}", ("A",)) for i in range(n)]
        for hook in hooks:
            await hook.start()
        pipe.send([hook.url for hook in hooks])
        loop = asyncio.get_running_loop()
        while True:
            asked = await loop.run_in_executor(None, pipe.recv)
            if asked == "counts":
                pipe.send([len(hook.seen) for hook in hooks])
            elif asked == "results":
                pipe.send(([x for hook in hooks for x in hook.lags],
                           [x for hook in hooks for x in hook.arrivals],
                           sum(hook.out_of_order() for hook in hooks)))
            else:
                return

    asyncio.run(serve())


async def until_received(hooks: Hooks, count: int, limit: float = 120) -> float:
    began = time.monotonic()
    while hooks.received() < count:
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


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


async def one_webhook(server: Server, db: Database, args: argparse.Namespace) -> None:
    with app(server, 1, "one") as world:
        cpu = lambda: tree_cpu_seconds(server.pid)  # noqa: E731
        print(f"one webhook: {load()} at the start")
        # The writes alone.
        before = cpu()
        n = await write(server, world, args.rate, args.seconds)
        base = (cpu() - before) / n
        # The same writes with one webhook.
        hooks = Hooks(1)
        uid = world.hook(hooks.urls[0], world.orgs[0], None)
        await asyncio.sleep(2)  # leased (a claim a second): the lag is the delivery's only
        before, began = cpu(), time.monotonic()
        n = await write(server, world, args.rate, args.seconds, start=10_000_000)
        await until_received(hooks, n)
        took = time.monotonic() - began
        with_hook = (cpu() - before) / n
        reached = WRITTEN[-1]
        lags, out_of_order = hooks.results()
        # The writes alone again, the webhook paused: the machine's load drifts between
        # phases, and the baseline is the mean of the runs before and after.
        world.set_status(uid, "paused")
        await asyncio.sleep(2)
        before = cpu()
        paused = n = await write(server, world, args.rate, args.seconds, start=15_000_000)
        after = (cpu() - before) / n
        base = (base + after) / 2
        print(f"one webhook, {args.rate:.0f} writes/s for {args.seconds:.0f} s (reached "
              f"{reached:.0f}/s; alone {WRITTEN[-3]:.0f}/s and {WRITTEN[-1]:.0f}/s): {paused} "
              f"deliveries ({hooks.received() / took:.0f}/s), lag p50 "
              f"{pct(lags, .5) * 1000:.0f} ms p99 {pct(lags, .99) * 1000:.0f} ms, out of order "
              f"{out_of_order}; server CPU per write alone {base * 1000:.2f} ms (before "
              f"{(2 * base - after) * 1000:.2f}, after {after * 1000:.2f}), per delivery "
              f"{(with_hook - base) * 1000:.2f} ms; {world.failures(uid)}")
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
        print(f"one operator stream instead (writes reached {WRITTEN[-1]:.0f}/s): "
              f"{counted[0]} frames, server CPU per frame "
              f"{per_frame * 1000:.2f} ms")
        # The backlog: written while paused (the second writes alone, the stream's and these),
        # then resumed.
        await write(server, world, args.rate, args.backlog / args.rate, start=30_000_000)
        waiting = paused + n + args.backlog  # everything written while it was paused
        had = hooks.received()
        before, began = cpu(), time.monotonic()
        world.set_status(uid, "active")
        took = await until_received(hooks, had + waiting, limit=600)
        sent = hooks.received() - had
        _, out_of_order = hooks.results()
        print(f"backlog of {waiting}: {sent} delivered in {took:.1f} s = {sent / took:.0f} "
              f"deliveries/s to one receiver, out of order {out_of_order}, server CPU "
              f"per delivery {(cpu() - before) / max(sent, 1) * 1000:.2f} ms; {load()}")
        hooks.stop()


class StreamLags:
    """Member streams of the table (raw sockets, bench.sse_clients), each frame's lag from its
    row's write (`createdAt`) to its arrival here."""

    def __init__(self, server: Server, world: App, tokens: list[str]) -> None:
        self.server, self.world = server, world
        self.tokens = tokens
        self.lags: list[float] = []
        self.clients: list[SseClient] = []

    async def start(self) -> None:
        path = f"/{self.world.name}/autocrud/events/subscribe"
        host, port = self.server.host, self.server.port
        self.clients = await open_subscribers(
            host, port, [(subscribe_request(host, port, path, token), None)
                         for token in self.tokens], self._block)

    def _block(self, client: SseClient, block: bytes, arrival: float) -> None:
        at = block.find(b'"createdAt":"')
        if at < 0:
            note_control(client, block)
            return
        stamp = block[at + 13:block.index(b'"', at + 13)].decode()
        self.lags.append(time.time() - _epoch(stamp))

    def report(self) -> str:
        lags, self.lags = self.lags, []
        return (f"{len(lags)} frames, lag p50 {pct(lags, .5) * 1000:.0f} ms p99 "
                f"{pct(lags, .99) * 1000:.0f} ms")

    async def stop(self) -> None:
        for client in self.clients:
            if client.transport is not None:
                client.transport.close()


async def many_webhooks(server: Server, db: Database, args: argparse.Namespace) -> None:
    with app(server, args.orgs, "many") as world:
        print(f"many webhooks: {load()} at the start")
        # The feed's streams: one member stream per org, first with no webhook, then with
        # the webhooks delivering the same writes (bench.fanout measures streams at scale;
        # this shows the webhooks leave their lag as it was).
        roles = ["viewer", "auditor", "reviewer"]
        hooked = [(i % args.orgs, roles[i % 3]) for i in range(args.hooks)]  # org, role
        tokens = (world.clerks[:args.orgs] if args.streams == "clerks"
                  else [world.member(org, role) for org, role in hooked])
        streams = StreamLags(server, world, tokens)
        await streams.start()
        before, began = tree_cpu_seconds(server.pid), time.monotonic()
        await write(server, world, args.many_rate, args.seconds)
        await asyncio.sleep(1.0)
        print(f"  {len(tokens)} member streams ({args.streams}), no webhook, "
              f"{args.many_rate:.0f} writes/s for {args.seconds:.0f} s (reached "
              f"{WRITTEN[-1]:.0f}/s): {streams.report()}, server CPU "
              f"{(tree_cpu_seconds(server.pid) - before) / (time.monotonic() - began) * 100:.0f}"
              f"% of a core")
        hooks = Hooks(args.hooks)
        for url, (org, role) in zip(hooks.urls, hooked, strict=True):
            world.hook(url, world.orgs[org], role)
        await asyncio.sleep(3)  # every webhook leased
        before, began = tree_cpu_seconds(server.pid), time.monotonic()
        n = await write(server, world, args.many_rate, args.seconds, start=10_000_000)
        expected = sum(1 for k in range(n) for i in range(args.hooks)
                       if k % args.orgs == i % args.orgs and not (roles[i % 3] == "reviewer"
                                                                  and k % 5 == 0))
        await until_received(hooks, expected)
        took = time.monotonic() - began
        lags, out_of_order = hooks.results()
        got = hooks.received()
        print(f"{args.hooks} webhooks over {args.orgs} orgs, 3 roles, {args.many_rate:.0f} "
              f"writes/s for {args.seconds:.0f} s (reached {WRITTEN[-1]:.0f}/s): {got} of "
              f"{expected} deliveries "
              f"({got / took:.0f}/s), lag p50 {pct(lags, .5) * 1000:.0f} ms p99 "
              f"{pct(lags, .99) * 1000:.0f} ms, out of order {out_of_order}, server CPU "
              f"{(tree_cpu_seconds(server.pid) - before) / took * 100:.0f}% of a core; "
              f"{load()}")
        print(f"  lag p99 in each fifth of the run: {hooks.over_time(5)} ms")
        print(f"  the same {len(tokens)} member streams meanwhile: {streams.report()}")
        judged = judged_by(server)
        print(f"  changes judged for the webhooks: {judged.get('shared', 0):.0f} shared with a "
              f"stream or webhook of the same read class, {judged.get('own', 0):.0f} re-read "
              f"by the webhook")
        await streams.stop()
        hooks.stop()


def judged_by(server: Server) -> dict[str, float]:
    """`authoric_webhook_judged_changes_total` summed over the webhooks, by `by`."""
    text = httpx.get(f"{server.url}/metrics",
                     headers={"Authorization": f"Bearer {server.admin_token}"}).text
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("authoric_webhook_judged_changes_total{"):
            labels, value = line.rsplit(" ", 1)
            by = labels.split('by="')[1].split('"')[0]
            totals[by] = totals.get(by, 0.0) + float(value)
    return totals


async def main_async(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="authoric-bench-webhooks-"))
    env = {"AUTHORIC_WEBHOOK_ALLOW_PRIVATE": "true", "AUTHORIC_WORKERS": str(args.workers)}
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
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes (AUTHORIC_WORKERS); with more than one, a "
                             "webhook and the streams of its read class may sit in different "
                             "processes and share nothing")
    parser.add_argument("--streams", choices=("clerks", "roles"), default="clerks",
                        help="many: one clerk stream per org, or one stream per webhook "
                             "holding its role in its org (its read class)")
    args = parser.parse_args(argv)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
