"""What the outermost middleware (request id, metrics, access-log check) adds per request,
measured in-process: the same minimal ASGI app called N times bare and through
`authoric.http.observe.Observe`, CPU time per call. A whole-server benchmark (bench.crud)
cannot resolve a few microseconds on a busy 2-core machine; this can.

    .venv/bin/python -m bench.observe_overhead            # 200,000 calls each, 5 rounds
    PROMETHEUS_MULTIPROC_DIR=$(mktemp -d) .venv/bin/python -m bench.observe_overhead
        # the same with prometheus-client's multiprocess mode (what --workers N uses)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

from authoric.http.observe import Observe
from authoric.observability.metrics import Metrics


class _Route:
    path = "/{app}/autocrud/{table}/{uid}"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    scope["route"] = _Route  # as FastAPI's router does once matched
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b""}


async def send(_: dict[str, Any]) -> None:
    return None


async def cpu_per_call(target: Any, calls: int) -> float:
    headers = [(b"host", b"x"), (b"authorization", b"Bearer t"), (b"accept", b"*/*")]
    start = time.process_time()
    for _ in range(calls):
        scope = {"type": "http", "method": "GET", "path": "/shop/autocrud/invoices/1",
                 "headers": headers}
        await target(scope, receive, send)
    return (time.process_time() - start) / calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    observed = Observe(app, Metrics())
    bare, wrapped = [], []
    for _ in range(args.rounds):  # alternating, best of each: least disturbed by other load
        bare.append(asyncio.run(cpu_per_call(app, args.calls)))
        wrapped.append(asyncio.run(cpu_per_call(observed, args.calls)))
    mode = "multiprocess" if os.environ.get("PROMETHEUS_MULTIPROC_DIR") else "single process"
    added = (min(wrapped) - min(bare)) * 1e6
    print(f"metrics mode: {mode}; {args.calls} calls x {args.rounds} rounds, best round")
    print(f"  bare app          {min(bare) * 1e6:6.2f} us CPU per request")
    print(f"  through Observe   {min(wrapped) * 1e6:6.2f} us CPU per request")
    print(f"  added             {added:6.2f} us CPU per request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
