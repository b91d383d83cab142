"""Webhooks across replicas: one process delivers a webhook at a time, and a process killed
mid-delivery is taken over, the delivery sent again with the same `webhook-id`
(contract section 8).

Two server processes on one database. Callers: the operator; a clerk writing invoices.
The receiver holds its first answer long enough for the test to kill the process waiting on
it (SIGKILL: no clean hand-over of the lease).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.receivers import Received, Receiver
from tests.scenario import AppWorld, expect
from tests.servers import start_server

PRIVATE = {"AUTHORIC_WEBHOOK_ALLOW_PRIVATE": "true", "AUTHORIC_WEBHOOK_DELIVERY": "true",
           "AUTHORIC_WEBHOOK_RETRY_BASE": "0.05",
           "AUTHORIC_WEBHOOK_RETRY_MAX": "0.2"}


def test_a_replica_killed_mid_delivery_is_taken_over_and_the_same_id_sent_again(
        database_url: str, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    first = start_server(database_url, tmp_path / "a", **PRIVATE)
    release = threading.Event()
    held = threading.Event()

    def slow_first(got: Received) -> tuple[int, dict[str, str]]:
        if not held.is_set():
            held.set()
            release.wait(30)  # the process waiting on this answer is killed meanwhile
        return 200, {}

    receiver = Receiver(answer=slow_first).start()
    second = None
    try:
        with httpx.Client(base_url=first.url, timeout=30) as client:
            world = AppWorld.create(first, client)
            world.table("invoices", [{"name": "number", "type": "text"}])
            org = world.org("North")
            world.role("clerk", ["invoices:*"])
            clerk = world.caller(org, ["clerk"])
            made = expect(world.admin.post(f"{world.base}/webhooks",
                                           json={"url": receiver.url, "tables": ["invoices"]}),
                          201)
            rows: list[dict[str, Any]] = [
                expect(clerk.post(world.rows("invoices"), json={"number": f"N-{i}"}), 201)
                for i in range(3)]
            assert held.wait(30), "the first delivery never arrived"
            first.stop(signal.SIGKILL)
            release.set()
        (tmp_path / "b").mkdir()
        second = start_server(database_url, tmp_path / "b", **PRIVATE)
        got = receiver.wait_count(3, timeout=60)
        assert [g.json()["row"]["uid"] for g in got] == [r["uid"] for r in rows]
        ids = [r.id for r in receiver.received()]
        assert ids[0] == ids[1] == got[0].id  # sent again, with the same webhook-id
        assert ids[1:] == [g.id for g in got]  # then in order, once each
        with httpx.Client(base_url=second.url, timeout=30) as client:
            client.headers["Authorization"] = f"Bearer {second.admin_token}"
            client.delete(f"/admin/apps/{world.name}/webhooks/{made['uid']}")
    finally:
        release.set()
        receiver.stop()
        for proc in (first, second):
            if proc is not None:
                proc.stop()

