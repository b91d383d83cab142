"""A webhook that keeps failing longer than the change log keeps its entries (contract section
8): when its receiver answers again, it first gets a `resync` `backfill_expired`, never a
silent skip over the entries retention removed; likewise when it had turned `failing` and
the operator resumes it.

Callers: the operator (admin token) makes the webhook; a clerk writes invoices. The server
here keeps changes 1 s (AUTHORIC_CHANGE_RETENTION=1) on a database of its own, retries after
at most 50-200 ms, and retention runs when the sequencer takes the lead: the test ends the
sequencer's connection once the first changes are older than a second, as the feed's
retention test does (tests/api/test_subscribe.py).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.receivers import DELIVERING, Received, Receiver
from tests.scenario import AppWorld, expect
from tests.servers import start_server
from tests.sse import db_value, drop_database, fresh_database, terminate
from tests.waiting import wait_until


@pytest.mark.parametrize("turned_failing", [False, True],
                         ids=["still-retrying", "failing-then-resumed-by-the-operator"])
def test_a_webhook_failing_past_the_logs_retention_gets_backfill_expired_then_the_rest(
        database_url: str, tmp_path: Path, turned_failing: bool) -> None:
    """Retrying when the receiver answers again, or turned `failing` (its retry window over)
    and then resumed by the operator's PATCH: either way a resync comes first."""
    url = fresh_database(database_url)
    proc = start_server(url, tmp_path, AUTHORIC_CHANGE_RETENTION="1",
                        **DELIVERING)
    accepted: list[Received] = []
    failing = threading.Event()
    failing.set()

    def answer(got: Received) -> tuple[int, dict[str, str]]:
        if failing.is_set():
            return 500, {}
        accepted.append(got)
        return 200, {}

    receiver = Receiver(answer=answer).start()
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            world = AppWorld.create(proc, client)
            world.table("invoices", [{"name": "number", "type": "text", "required": True}])
            org = world.org("Northwind")
            world.role("clerk", ["invoices:*"])
            clerk = world.caller(org, ["clerk"])
            if turned_failing:  # about a second of retries
                expect(world.admin.patch(world.base, json={
                    "settings": {"webhookRetryHours": 0.0003}}), 200)
            made = expect(world.admin.post(f"{world.base}/webhooks", json={
                "url": receiver.url, "tables": ["invoices"]}), 201)
            hook = f"{world.base}/webhooks/{made['uid']}"
            old = [expect(clerk.post(world.rows("invoices"), json={"number": f"old-{i}"}), 201)
                   for i in range(3)]
            receiver.wait_for(lambda _: len(receiver.received()) >= 2, what="retries")
            if turned_failing:
                wait_until(lambda: expect(world.admin.get(hook), 200)["status"] == "failing",
                      "the webhook to turn failing")
            last_old = int(db_value(url, "SELECT max(pos) FROM authoric.changes"))
            wait_until(lambda: db_value(url, "SELECT count(*) FROM authoric.changes WHERE pos <= $1 "
                                        "AND created_at >= now() - interval '1.5 seconds'",
                                   last_old) == 0, "the first changes to be older than 1.5 s")
            assert terminate(url, "authoric-sequencer")  # the next leader runs retention first
            wait_until(lambda: (db_value(url, "SELECT pos FROM authoric.log_horizon WHERE id = 1")
                           or 0) >= last_old, "retention")
            horizon = int(db_value(url, "SELECT pos FROM authoric.log_horizon WHERE id = 1"))
            after = expect(clerk.post(world.rows("invoices"), json={"number": "after"}), 201)
            failing.clear()
            if turned_failing:
                expect(world.admin.patch(hook, json={"status": "active"}), 200)
            receiver.wait_for(lambda _: any(r.json().get("row", {}).get("uid") == after["uid"]
                                            for r in accepted), what="the change after")
            bodies: list[dict[str, Any]] = [r.json() for r in accepted]
            assert bodies[0] == {**bodies[0], "type": "resync", "reason": "backfill_expired",
                                 "position": str(horizon)}
            assert accepted[0].id == str(horizon)
            assert [b.get("row", {}).get("uid") for b in bodies[1:]] == [after["uid"]]
            assert not {o["uid"] for o in old} & {b.get("row", {}).get("uid") for b in bodies}
            got = expect(world.admin.get(hook), 200)
            assert got["status"] == "active"
    finally:
        receiver.stop()
        proc.stop()
        drop_database(url)
