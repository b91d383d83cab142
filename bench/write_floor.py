"""`python -m bench.write_floor`: what the feed's traffic costs on this box with no Authoric
code at all, as a floor under `bench.fanout`'s figures.

bench.fanout (captured writes, 50/s, 150 read classes) puts the feed's share at 1.1-1.5 ms of
server CPU per change, about 19 deliveries each. Run in pairs, 1,000 subscribers against 150
(one per class, about 3 deliveries per change) differ by about 35 µs per extra delivery, and
the rest, about 0.7 ms, is paid once per change. This measures the same traffic in a uvloop
process (the server's loop) that does nothing but the I/O:

- `writes`: per pass, one SSE-sized frame, framed as a chunk of a chunked body (as uvicorn
  frames a stream's), written to `--per-pass` of `--connections` loopback TCP connections
  held open to a reader process (asyncio, as the load client reads);
- `trip+writes`: the same, after one round trip to PostgreSQL on a kept asyncpg connection
  (`SELECT 1`): the judge's wake, without the judge;
- `trip`: the round trip alone.

Passes come `--rate` times a second, each after a sleep, as a change's NOTIFY wakes the
worker that owns its org. Each round runs an idle window (the same process, connections open,
no pass) and one window per variant; the process's CPU per pass is its CPU in the window less
the idle window's, over the passes. Printed per variant: µs per pass and, for writes, per
write; and the reader's CPU beside it.

    .venv/bin/python -m bench.write_floor                      # 1,000 connections, 19 per pass, 50/s
    .venv/bin/python -m bench.write_floor --rate 200 --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
import uvloop

from authoric.serving.wire import chunked
from bench.harness import database, process_cpu_seconds

# One change frame as bench.fanout's subscribers get it (about 330 bytes), chunk-framed.
BODY = (b'id: 123456\ndata: {"op":"insert","table":"invoices","row":{"uid":"0f8e1a52-6c1b-4d5e-'
        b'9a7e-3b2c1d0e9f8a","createdAt":"2026-12-06T14:00:00.000000Z","updatedAt":"2026-12-06'
        b'T14:00:00.000000Z","number":"INV-123456","status":"received","amount":"100.50","seq":'
        b'123456,"stamp":1765029600.123456,"secret":null,"vendor_uid":null}}\n\n')
CHUNK = chunked(BODY)
VARIANTS = ("writes", "trip+writes", "trip")


class Held(asyncio.Protocol):
    """One accepted connection: its transport, and nothing read."""

    transport: Any  # uvloop's TCPTransport (not a subclass of asyncio.Transport)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport


async def window(held: Sequence[Held], conn: asyncpg.Connection | None, variant: str,
                 rate: float, per_pass: int, seconds: float) -> tuple[float, int]:
    """Run passes for `seconds` (none for `idle`): this process's CPU-seconds, and passes."""
    loop = asyncio.get_running_loop()
    every, start, ticks, passes = 1 / rate, loop.time(), 0, 0
    cpu = time.process_time()
    while loop.time() - start < seconds:
        ticks += 1
        await asyncio.sleep(max(0.0, start + ticks * every - loop.time()))
        if variant == "idle":
            continue
        if conn is not None:
            await conn.fetchval("SELECT 1")
        if variant != "trip":
            first = (passes * per_pass) % len(held)
            for i in range(first, first + per_pass):
                held[i % len(held)].transport.write(CHUNK)
        passes += 1
    return time.process_time() - cpu, passes


async def run(args: argparse.Namespace, dsn: str) -> dict[str, list[float]]:
    loop = asyncio.get_running_loop()
    held: list[Held] = []

    def made() -> Held:
        held.append(Held())
        return held[-1]

    server = await loop.create_server(made, "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    reader = subprocess.Popen([sys.executable, "-m", "bench.write_floor", "--read",
                               f"{port}:{args.connections}"])
    conn = await asyncpg.connect(dsn)
    per: dict[str, list[float]] = {v: [] for v in VARIANTS}
    try:
        while len(held) < args.connections:
            await asyncio.sleep(0.05)
        print(f"{len(held)} connections open; {args.rate:g} passes/s, {args.per_pass} writes "
              f"per pass, {args.seconds:g} s windows, {args.rounds} rounds")
        for r in range(1, args.rounds + 1):
            idle_cpu, _ = await window(held, None, "idle", args.rate, 0, args.seconds)
            for variant in VARIANTS:
                before = process_cpu_seconds(reader.pid, with_reaped_children=False)
                cpu, passes = await window(held, None if variant == "writes" else conn,
                                           variant, args.rate, args.per_pass, args.seconds)
                read = process_cpu_seconds(reader.pid, with_reaped_children=False) - before
                us = (cpu - idle_cpu) / passes * 1e6
                per[variant].append(us)
                writes = args.per_pass if variant != "trip" else 0
                print(f"  r{r} {variant:<12} {us:7.0f} µs per pass"
                      + (f"  {us / writes:5.1f} µs per write" if writes else "")
                      + f"   (reader: {read / passes * 1e6:6.0f} µs per pass; idle window "
                      f"{idle_cpu / args.seconds * 100:.1f}% of a core)")
    finally:
        await conn.close()
        reader.terminate()
        reader.wait(10)
        server.close()
    return per


async def drain(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    while await r.read(65536):
        pass
    w.close()


async def read_all(port: int, count: int) -> None:
    """The reader: `count` connections to the writer, each read and discarded until EOF."""
    readers = []
    for _ in range(count):  # one at a time: a burst of SYNs past the backlog waits seconds
        r, w = await asyncio.open_connection("127.0.0.1", port)
        readers.append(asyncio.ensure_future(drain(r, w)))
    await asyncio.gather(*readers, return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.write_floor", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--per-pass", type=int, default=19,
                    help="writes per pass (19: bench.fanout's deliveries per change)")
    ap.add_argument("--rate", type=float, default=50, help="passes per second")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--read", help=argparse.SUPPRESS)  # PORT:COUNT, the reader process
    args = ap.parse_args(argv)
    if args.read:
        port, count = (int(x) for x in args.read.split(":"))
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(read_all(port, count))
        return 0
    print(f"bench.write_floor, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, uvloop {uvloop.__version__}; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp, database(Path(tmp)) as db:
        per = uvloop.run(run(args, db.url))
    print("\n| variant | µs per pass, by round | median | µs per write (median) |")
    print("|---|---|--:|--:|")
    for variant, values in per.items():
        med = statistics.median(values)
        writes = args.per_pass if variant != "trip" else 0
        print(f"| {variant} | {', '.join(f'{v:.0f}' for v in values)} | {med:.0f} | "
              + (f"{med / writes:.1f} |" if writes else "- |"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
