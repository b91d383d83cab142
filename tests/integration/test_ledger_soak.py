"""A ledger soak: a few concurrent writers make a thousand or more inserts, updates and deletes while
several subscribers keep dropping their connection and resuming with `Last-Event-ID` (or
`?lastEventId=`). At the end each subscriber's frames are checked against the change log:
every committed change it may see was received, exactly once, in position order.

What a subscriber "may see" is fixed per row here (the row policy reads `region`, which no
writer changes), so it can be computed from the log:
- a delete it may see must arrive (judged on the old image);
- an insert or update of a row that still exists at the end must arrive (the re-read finds it);
- an insert or update of a row deleted later may be skipped (the re-read found it gone),
  but if it arrives it must be in order like the rest.
The soak ends on conditions, not on a clock: once 1,000 writes are done and every subscriber
has resumed at least 10 times (quick on an idle machine, slower on a busy one, the same test
either way). A deadline of 10 minutes only stops a run that is broken; the counts are printed.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess
from tests.sse import Frame, SSEClient, db_fetch, log_head

WRITES = 1000  # at least this many writes...
RESUMES = 10  # ...and at least this many resumes by every subscriber
WRITE_BUDGET = 6000  # then stop, whatever the subscribers did (they are checked after)
DEADLINE_S = 600.0  # a broken run fails here; a slow one is far inside it
REGIONS = ("north", "south")


@dataclass
class Written:
    """What the writers did, by row: its org and region; which rows were deleted."""

    rows: dict[str, tuple[str, str]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    count: int = 0  # writes that succeeded
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Follower:
    """A subscriber that keeps disconnecting and resuming until it has seen its fence."""

    name: str
    token: str
    org: str
    regions: tuple[str, ...]
    redacted: bool
    url: str
    path: str
    seed: int
    fence: str | None = None
    first: SSEClient | None = None  # the first connection, opened before any write
    start: int | None = None  # the log head before any write
    connections: list[tuple[Any, int | None, int | None]] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)  # every frame with an id, in arrival order
    reconnects: int = 0
    via_query: int = 0
    error: BaseException | None = None

    def run(self, stop_after: float) -> None:
        try:
            self._follow(stop_after)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _follow(self, stop_after: float) -> None:
        rng = random.Random(self.seed)
        # Until a frame with an id arrives, resume from the head read before any write (a
        # client that has seen nothing yet still knows where it started).
        last: int | None = self.start
        while True:
            assert time.monotonic() < stop_after, f"{self.name}: fence not received in time"
            kw: dict[str, Any] = {}
            if last is not None and rng.random() < 0.3:
                kw["params"] = {"lastEventId": str(last)}
                self.via_query += 1
            else:
                kw["last_event_id"] = last
            stream, self.first = self.first or SSEClient(self.url, self.path, self.token, **kw), None
            try:
                assert stream.status_code == 200, (stream.status_code, stream.body)
                hold = rng.uniform(0.05, 2.0)  # then drop the connection, mid-stream
                with contextlib.suppress(AssertionError):
                    stream.wait_until(self._until_fence_or_end(stream), timeout=hold)
            finally:
                stream.close()
            got = [f for f in stream.frames if f.id is not None]
            self.frames += got
            self.connections.append((kw.get("last_event_id") or (kw.get("params") or {}).get(
                "lastEventId"), got[0].pos if got else None, got[-1].pos if got else None))
            if got:
                last = got[-1].pos
            if self._has_fence(self.frames):
                return
            self.reconnects += 1

    def _until_fence_or_end(self, stream: SSEClient) -> Callable[[list[Frame]], bool]:
        return lambda frames: self._has_fence(frames) or stream.ended.is_set()

    def _has_fence(self, frames: list[Frame]) -> bool:
        fence = self.fence
        return fence is not None and any(f.is_change and f.row_uid == fence for f in frames)


def write(caller: Caller, org: str, rows_path: str, written: Written, seed: int,
          enough: Callable[[], bool], deadline: float) -> None:
    try:
        _write(caller, org, rows_path, written, seed, enough, deadline)
    except BaseException as exc:  # reported by the test
        with written.lock:
            written.errors.append(repr(exc))


def _write(caller: Caller, org: str, rows_path: str, written: Written, seed: int,
           enough: Callable[[], bool], deadline: float) -> None:
    rng = random.Random(seed)
    live: list[str] = []
    while not enough():
        assert time.monotonic() < deadline, f"only {written.count} writes before the deadline"
        with written.lock:
            if written.count >= WRITE_BUDGET:
                return
            trickle = written.count >= WRITES
        if trickle:
            # The writes are done; the subscribers' resumes may not be (each holds a stream up to
            # 2 s). A trickle keeps changes flowing across those resumes without spending the
            # budget: on a fast server a full-speed writer spent it before the last resume.
            time.sleep(0.1)
        r = rng.random()
        if not live or r < 0.45:
            region = rng.choice(REGIONS)
            row = expect(caller.post(rows_path, json={
                "region": region, "amount": f"{rng.randint(1, 99999)}.{rng.randint(0, 99):02d}",
                "memo": uuid.uuid4().hex}), 201)
            with written.lock:
                written.rows[row["uid"]] = (org, region)
                written.count += 1
            live.append(row["uid"])
        elif r < 0.85:
            uid = rng.choice(live)
            expect(caller.patch(f"{rows_path}/{uid}", json={
                "amount": f"{rng.randint(1, 99999)}.00", "memo": uuid.uuid4().hex}), 200)
            with written.lock:
                written.count += 1
        else:
            uid = live.pop(rng.randrange(len(live)))
            expect(caller.delete(f"{rows_path}/{uid}"), 204)
            with written.lock:
                written.deleted.add(uid)
                written.count += 1


def test_ledger_soak_every_visible_committed_change_arrives_once_in_order_across_resumes(
        server: ServerProcess, http: httpx.Client, database_url: str) -> None:
    world = AppWorld.create(server, http)
    world.table("ledger", [{"name": "region", "type": "text", "required": True},
                           {"name": "amount", "type": "numeric"},
                           {"name": "memo", "type": "text"}])
    org_a, org_b = world.org("Northwind"), world.org("Southwind")
    world.role("clerk", ["ledger:*"])
    world.role("north_only", ["ledger:read_list", "ledger:read"],
               row_policies={"ledger": {"region": {"eq": "north"}}})
    world.role("auditor", ["ledger:read_list", "ledger:read"], redact={"ledger": ["amount"]})
    app_uid = uuid.UUID(expect(world.admin.get(world.base), 200)["uid"])
    rows_path = world.rows("ledger")
    path = f"{rows_path}/subscribe"

    def follower(name: str, org: str, role: str, seed: int) -> Follower:
        token = world.caller(org, [role]).token
        assert token is not None
        regions = ("north",) if role == "north_only" else REGIONS
        return Follower(name, token, org, regions, role == "auditor", server.url, path, seed)

    followers = [follower("clerk-a1", org_a, "clerk", 1), follower("clerk-a2", org_a, "clerk", 2),
                 follower("north-a1", org_a, "north_only", 3),
                 follower("north-a2", org_a, "north_only", 4),
                 follower("auditor-a", org_a, "auditor", 5), follower("clerk-b", org_b, "clerk", 6)]
    # Each follower's first connection (no Last-Event-ID) is open before any write, so every
    # change of this table is theirs to receive.
    for f in followers:
        f.first = SSEClient(server.url, path, f.token)
        f.first.wait_connected()
        f.start = log_head(database_url)
    start = time.monotonic()
    deadline = start + DEADLINE_S
    threads = [threading.Thread(target=f.run, args=(deadline + 150,), name=f.name)
               for f in followers]
    for thread in threads:
        thread.start()

    written = Written()
    clients = [httpx.Client(base_url=server.url, timeout=30) for _ in range(4)]
    writers: list[tuple[Caller, str]] = [
        (world.caller(org_a, ["clerk"]), org_a), (world.caller(org_a, ["clerk"]), org_a),
        (world.caller(org_a, ["clerk"]), org_a), (world.caller(org_b, ["clerk"]), org_b)]
    def enough() -> bool:
        return written.count >= WRITES and all(f.reconnects >= RESUMES for f in followers)

    writer_threads = [
        threading.Thread(target=write, args=(Caller(clients[i], caller.token), org, rows_path,
                                             written, 100 + i, enough, deadline))
        for i, (caller, org) in enumerate(writers)]
    for thread in writer_threads:
        thread.start()
    for thread in writer_threads:
        thread.join()
    assert not written.errors, written.errors
    write_seconds = time.monotonic() - start
    for client in clients:
        client.close()

    # Fences: one visible row per org, written after every other write committed.
    fence_a = expect(writers[0][0].post(rows_path, json={"region": "north"}), 201)["uid"]
    fence_b = expect(writers[3][0].post(rows_path, json={"region": "north"}), 201)["uid"]
    written.rows[fence_a], written.rows[fence_b] = (org_a, "north"), (org_b, "north")
    for f in followers:
        f.fence = fence_a if f.org == org_a else fence_b
    for thread in threads:
        thread.join(max(0.0, deadline + 160 - time.monotonic()))
    errors = [(f.name, repr(f.error)) for f in followers if f.error is not None]
    assert not errors, errors

    log = db_fetch(database_url, "SELECT pos, op, row_uid, org_uid FROM authoric.changes "
                                 "WHERE app_uid = $1 AND table_name = 'ledger' AND pos IS NOT NULL "
                                 "ORDER BY pos", app_uid)
    assert not db_fetch(database_url, "SELECT 1 FROM authoric.changes WHERE app_uid = $1 "
                                      "AND pos IS NULL", app_uid)
    assert len(log) == written.count + 2  # every write recorded once, fences included
    report = [f"writes: {written.count} (+2 fences) in {write_seconds:.1f}s; log entries: {len(log)}"]
    failures = []
    for f in followers:
        counts = _check(f, log, written)
        report.append(f"{f.name:10} " + " ".join(f"{k}={v}" for k, v in counts.items()))
        if counts["lost"] or counts["out_of_order"] or counts["leaked"] or counts["bad_rows"]:
            failures.append(f.name)
            report.append(_explain(f, log, written))
    print("\n" + "\n".join(report))
    assert not failures, "\n".join(report)
    # What the soak is for: many writes, seen across many resumes (the conditions it ran to).
    assert written.count >= WRITES, "\n".join(report)
    assert all(f.reconnects >= RESUMES for f in followers), "\n".join(report)


def _check(f: Follower, log: list[Any], written: Written) -> dict[str, int]:
    """Compare one follower's frames with what the log says it may see."""
    must: set[int] = set()
    may: set[int] = set()
    for entry in log:
        uid = str(entry["row_uid"])
        _, region = written.rows[uid]
        if str(entry["org_uid"]) != f.org or region not in f.regions:
            continue
        if entry["op"] == "delete" or uid not in written.deleted:
            must.add(entry["pos"])
        else:
            may.add(entry["pos"])
    changes = [fr for fr in f.frames if fr.is_change]
    resyncs = [fr for fr in f.frames if fr.event == "resync"]
    # A backfill_truncated resync legitimately skips (lastId, id]; none is expected here.
    exempt = set()
    for r in resyncs:
        if r.data.get("reason") == "backfill_truncated":
            exempt |= {p for p in must if r.data["lastId"] < p <= r.pos}
    ids = [fr.pos for fr in f.frames]
    received = {fr.pos for fr in changes}
    bad_rows = 0
    for fr in changes:
        if fr.op == "delete":
            continue
        row = fr.data["row"]
        if row["region"] not in f.regions or (row["amount"] == "[redacted]") != f.redacted:
            bad_rows += 1
    return {
        "received": len(changes),
        "must": len(must),
        "optional_received": len(received & may),
        "lost": len(must - received - exempt),
        "out_of_order": sum(1 for a, b in itertools.pairwise(ids) if b <= a),
        "duplicates": len(changes) - len(received),
        "leaked": len(received - must - may),
        "bad_rows": bad_rows,
        "reconnects": f.reconnects,
        "via_query": f.via_query,
        "resyncs": len(resyncs),
    }



def _explain(f: Follower, log: list[Any], written: Written) -> str:
    """For a failure: the missing entries, and the connections around them."""
    received = {fr.pos for fr in f.frames}
    missing = [e for e in log if e["pos"] not in received and str(e["org_uid"]) == f.org
               and written.rows[str(e["row_uid"])][1] in f.regions][:5]
    lines = []
    for e in missing:
        uid = str(e["row_uid"])
        around = [c for c in f.connections
                  if c[1] is not None and c[2] is not None and c[1] - 50 < e["pos"] < c[2] + 50]
        history = [(h["pos"], h["op"]) for h in log if str(h["row_uid"]) == uid]
        lines.append(f"  missing pos={e['pos']} op={e['op']} row={uid} deleted={uid in written.deleted}"
                     f" row history={history} connections (resumed from, first, last)={around}")
    return "\n".join(lines)
