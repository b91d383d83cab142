"""A relay whose LISTEN connection stalls (changes/relay.py).

A proxy or a NAT can freeze a connection while its TCP stays open: no error, no close, no
reply. Callers: a clerk writing over REST and subscribed to the table, on a server whose
database traffic goes through the chaos run's proxy (bench/chaos.py), which freezes the
relay's connection for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from bench.chaos import Proxy, upstream

from tests.scenario import AppWorld, expect
from tests.servers import start_server
from tests.sse import SSEClient, drop_database, fresh_database

WIDE = 60.0


@contextlib.contextmanager
def proxy_to(url: str) -> Iterator[tuple[Proxy, asyncio.AbstractEventLoop]]:
    """The proxy, on a loop of its own in a thread, in front of `url`'s PostgreSQL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True, name="proxy")
    thread.start()
    proxy = Proxy(upstream(url))
    asyncio.run_coroutine_threadsafe(proxy.start(), loop).result(10)
    try:
        yield proxy, loop
    finally:
        asyncio.run_coroutine_threadsafe(proxy.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_a_subscriber_keeps_receiving_writes_while_its_relays_connection_is_frozen(
        database_url: str, tmp_path: Path) -> None:
    url = fresh_database(database_url)
    try:
        with proxy_to(url) as (proxy, loop):
            server = start_server(proxy.url(url), tmp_path)
            try:
                with httpx.Client(base_url=server.url, timeout=30) as client:
                    world = AppWorld.create(server, client)
                    world.table("events", [{"name": "n", "type": "integer"}])
                    org = world.org("Northwind")
                    world.role("clerk", ["events:*"])
                    clerk = world.caller(org, ["clerk"])
                    assert clerk.token is not None
                    with SSEClient(server.url, f"{world.rows('events')}/subscribe",
                                   clerk.token) as stream:
                        stream.wait_connected()
                        before = expect(clerk.post(world.rows("events"), json={"n": 1}), 201)
                        stream.wait_for_change(before["uid"], timeout=WIDE)

                        frozen = proxy.relay_links()
                        assert len(frozen) == 1
                        loop.call_soon_threadsafe(frozen[0].flowing.clear)  # never thawed

                        during = expect(clerk.post(world.rows("events"), json={"n": 2}), 201)
                        stream.wait_for_change(during["uid"], timeout=WIDE)
                        assert [f.row_uid for f in stream.changes()] == [before["uid"],
                                                                         during["uid"]]
                        # and the relay listens again, on a connection of its own
                        deadline = time.monotonic() + WIDE
                        while not [x for x in proxy.relay_links() if x is not frozen[0]]:
                            assert time.monotonic() < deadline, "the relay never reconnected"
                            time.sleep(0.1)
            finally:
                server.stop()
    finally:
        drop_database(url)
