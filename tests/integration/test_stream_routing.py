"""Streams routed by org (serving/handoff.py), as an operator serving two workers and their
subscribers see it: every stream of one org is held by one worker, whichever worker the kernel
gave the connection to, and each stream still receives its org's changes."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import httpx

from authoric.serving.handoff import slot_of
from tests.integration.test_cli import bare_env, listening_workers, serve, socket_inodes
from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess
from tests.sse import SSEClient

STREAMS = 16  # per org: were they spread by the kernel, all on one worker once in 2**15


def server_ends(port: int) -> dict[str, int]:
    """The established TCP sockets on the server's `port`: inode -> the client's port."""
    ends = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if int(f[1].split(":")[1], 16) == port and f[3] == "01":
            ends[f[9]] = int(f[2].split(":")[1], 16)
    return ends


def holders(port: int, workers: list[int], feeds: list[SSEClient]) -> set[int]:
    """The workers holding the server's end of `feeds`' connections."""
    ports = {feed._socket.getsockname()[1] for feed in feeds if feed._socket is not None}
    assert len(ports) == len(feeds)
    ends = server_ends(port)
    held = {pid for pid in workers for inode in socket_inodes(pid) & set(ends)
            if ends[inode] in ports}
    return held


def test_every_stream_of_an_org_is_held_by_one_worker_and_gets_its_changes(
        database_url: str, tmp_path: Path) -> None:
    env = bare_env(DATABASE_URL=database_url, AUTHORIC_DATA_DIR=str(tmp_path / "data"))
    served = serve(env, tmp_path / "serve.out", "--workers", "2")
    try:
        port, workers = listening_workers(served)
        assert len(workers) == 2
        token = (tmp_path / "data" / "admin_token").read_text().strip()
        with httpx.Client(base_url=served.url, timeout=30) as client:
            world = AppWorld.create(ServerProcess(served.url, token, served.process,
                                                  served.output), client)
            world.table("notes", [{"name": "body", "type": "text"}])
            world.role("reader", ["notes:read_list", "notes:read", "notes:create"])
            first = world.org("first")
            # An org that falls in the other slot, so the two orgs' streams part ways.
            second = next(uid for uid in (world.org(f"second-{i}") for i in range(64))
                          if slot_of(uid, 2) != slot_of(first, 2))
            readers = {org: world.caller(org, ["reader"]) for org in (first, second)}
            path = f"{world.rows('notes')}/subscribe"
            with contextlib.ExitStack() as stack:
                feeds = {org: [stack.enter_context(SSEClient(served.url, path, caller.token))
                               for _ in range(STREAMS)] for org, caller in readers.items()}
                for feed in (f for group in feeds.values() for f in group):
                    feed.wait_connected()
                held = {org: holders(port, workers, group) for org, group in feeds.items()}
                assert [len(pids) for pids in held.values()] == [1, 1]
                assert held[first] != held[second]
                body = f"note {uuid.uuid4()}"
                row = expect(readers[first].post(world.rows("notes"), json={"body": body}), 201)
                for feed in feeds[first]:
                    frame = feed.wait_for(lambda f: f.is_change)
                    assert (frame.op, frame.row_uid) == ("insert", row["uid"])
                assert not any(f.is_change for feed in feeds[second] for f in feed.frames)
            metrics = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert metrics.status_code == 200
        # Half the connections, give or take, came in on the other org's worker.
        assert 'authoric_sse_stream_handoffs_total{outcome="sent"}' in metrics.text
    finally:
        assert served.stop() == 0
