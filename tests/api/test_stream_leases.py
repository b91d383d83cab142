"""The per-user stream cap holds for the deployment (issue 19, finding 4): leases in
PostgreSQL, shared by every worker and replica, that lapse when their process dies.

Callers: one member opening streams on a server with two workers and on a second replica of
the same deployment; then the replica holding some of them is killed (SIGKILL).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess, start_server
from tests.sse import SSEClient

CAP = 3
LEASE_TTL = 4  # seconds: a killed replica's slots are free within it (waited on with margin)
WAIT = 60.0


@pytest.fixture(scope="module")
def deployment(database_url: str, data_dir: Path, server: ServerProcess,
               ) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two workers behind one port, and a second replica: one database, one secret."""
    env = {"AUTHORIC_SSE_MAX_STREAMS_PER_USER": str(CAP),
           "AUTHORIC_SSE_LEASE_TTL": str(LEASE_TTL)}
    workers = start_server(database_url, data_dir, AUTHORIC_WORKERS="2", **env)
    try:
        replica = start_server(database_url, data_dir, **env)
        try:
            yield workers, replica
        finally:
            replica.stop()
    finally:
        workers.stop()


def _eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT}s: {what}")
        time.sleep(0.2)


def test_one_member_holds_at_most_the_cap_across_workers_and_replicas_until_a_replica_dies(
        world: AppWorld, deployment: tuple[ServerProcess, ServerProcess]) -> None:
    workers, replica = deployment
    world.table("notes", [{"name": "text", "type": "text"}])
    world.role("reader", ["notes:read_list", "notes:read"])
    member = world.caller(world.org("A"), ["reader"])
    path = f"{world.rows('notes')}/subscribe"
    opened: list[SSEClient] = []

    def open_on(server: ServerProcess) -> SSEClient:
        stream = SSEClient(server.url, path, member.token)
        if stream.status_code == 200:
            stream.wait_connected()
            opened.append(stream)
        return stream

    try:
        # Spread over the replica and (new connections each) both workers of the other.
        first = [open_on(s) for s in (replica, workers, workers)]
        assert [s.status_code for s in first] == [200] * CAP
        for server in (workers, workers, replica):
            refused = open_on(server)
            assert refused.status_code == 429, refused.body
            # When the first lease could lapse: never past the TTL, so no client waits longer
            # than a dead replica's slot takes to come free.
            assert 1 <= int(refused.headers["Retry-After"]) <= LEASE_TTL, refused.headers
            refused.close()
        # A stream that ends frees its slot.
        opened.pop(1).close()
        _eventually(lambda: open_on(workers).status_code == 200, "a closed stream's slot reused")
        assert open_on(replica).status_code == 429
        # The replica holding one of the slots dies without a word: its lease lapses.
        replica.stop(signal.SIGKILL)
        _eventually(lambda: open_on(workers).status_code == 200, "a dead replica's slot reused")
        assert open_on(workers).status_code == 429
    finally:
        for stream in opened:
            stream.close()
    expect(member.get(world.rows("notes")), 200)
