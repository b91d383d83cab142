"""What a live-feed stream's wait for its next frame costs: `asyncio.wait_for(queue.get(), t)`
(before 2026-12-03) against `async with asyncio.timeout(t): await queue.get()` (now).

A stream (realtime/stream.py) waits on its queue with a deadline (the next ping, or the
token's expiry) whenever the queue is empty. `wait_for` wraps each `get` in a task of its own
and, on Python 3.11, swallows a cancellation that meets a delivery; `asyncio.timeout` awaits
in the stream's own task. One producer feeds one consumer through a bounded queue, on uvloop
as the server runs; printed is CPU µs per item for each way, in alternating rounds.

    .venv/bin/python -m bench.stream_wait            # 100,000 items, 3 rounds
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

import uvloop

Consumer = Callable[["asyncio.Queue[int]", int], Awaitable[None]]


async def with_wait_for(queue: asyncio.Queue[int], items: int) -> None:
    got = 0
    while got < items:
        try:
            await asyncio.wait_for(queue.get(), 15)
        except TimeoutError:
            continue
        got += 1


async def with_timeout(queue: asyncio.Queue[int], items: int) -> None:
    got = 0
    while got < items:
        try:
            async with asyncio.timeout(15):
                await queue.get()
        except TimeoutError:
            continue
        got += 1


async def produce(queue: asyncio.Queue[int], items: int) -> None:
    for i in range(items):
        await queue.put(i)
        if i % 10 == 0:
            await asyncio.sleep(0)  # let the consumer find an empty queue now and then


async def cpu_us_per_item(consume: Consumer, items: int) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue(maxsize=64)
    started = time.process_time()
    await asyncio.gather(consume(queue, items), produce(queue, items))
    return (time.process_time() - started) / items * 1e6


async def measure(items: int, rounds: int) -> None:
    for n in range(1, rounds + 1):
        for consume in (with_wait_for, with_timeout):
            cost = await cpu_us_per_item(consume, items)
            print(f"round {n}  {consume.__name__:<13} {cost:6.2f} µs CPU per item", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    uvloop.run(measure(args.items, args.rounds))


if __name__ == "__main__":
    main()
