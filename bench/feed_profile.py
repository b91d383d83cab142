"""`python -m bench.feed_profile`: where the feed's CPU goes, down to the system calls.

Runs `bench.fanout` (1,000 subscribers, 150 read classes, one rate), and once its streams are
open samples every worker of its server with py-spy, C and Cython frames included
(`--native`). Each worker's busy samples are then split by what the worker was doing:

- the fan-out pass (`Relay._follow`: taking a batch, judging it, writing frames);
- the sequencer (`Sequencer._lead`: looking for unstamped changes, stamping them);
- the relay outside its pass (its NOTIFY callback, its polls);
- the streams' own tasks (pings, replays: what a stream sends through its request's task);
- other HTTP requests (the REST writes, with `--writer rest`);
- the event loop's other work (reading sockets, timers, callbacks).

The pass is split again by where its samples stopped (the innermost frame): the kernel
writing to a socket, asyncpg's or uvloop's compiled code, the interpreter and C library, and
Python functions, ours and others'. That says how much of a change's cost is interpreted code
that could still be trimmed, and how much is a floor of system calls and compiled drivers.

py-spy stops the process to read a native stack, so sampled CPU runs higher than unsampled;
read the shares, not the seconds.

    .venv/bin/python -m bench.feed_profile                        # captured writes, 50/s
    .venv/bin/python -m bench.feed_profile --writer rest --rate 200 --seconds 30
"""

from __future__ import annotations

import argparse
import collections
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import process_tree
from bench.profile import command_line, record, samples, serving_workers

# Areas of a worker, by a frame anywhere in the stack; the first that matches wins.
AREAS = (
    ("the fan-out pass", "Relay._follow ("),
    ("the sequencer", "Sequencer._lead ("),
    ("the relay outside its pass", "Relay."),
    ("the streams' own tasks", "(authoric/http/subscribe.py:"),
    ("other HTTP requests", "run_asgi ("),
)
LOOP = "the event loop's other work"
OPENED = re.compile(r"subscribers .*open in ")  # bench.fanout's line once its streams are open
# Innermost frames of the C library that are system calls writing to or reading from a socket.
WRITES = ("write (libc", "writev (libc", "send (libc", "sendmsg (libc", "sendto (libc")
READS = ("read (libc", "recv (libc", "recvfrom (libc", "recvmsg (libc")


@dataclass
class WorkerSplit:
    """One worker's busy samples: by area, and the pass's by where they stopped."""

    busy: int = 0
    areas: collections.Counter[str] = field(default_factory=collections.Counter)
    stops: collections.Counter[str] = field(default_factory=collections.Counter)
    ours: collections.Counter[str] = field(default_factory=collections.Counter)  # the pass's


def idle(frames: list[str]) -> bool:
    """A sample that is not the feed's work: the event loop waiting in its poll, or any thread
    but the main one, which runs the loop (under bench.fanout anyio's worker threads only
    wait on their lock; a thread that did work would be left out too)."""
    return frames[-1].startswith("epoll_pwait") or any("Thread._bootstrap" in f for f in frames)


def area_of(frames: list[str]) -> str:
    for name, marker in AREAS:
        if any(marker in f for f in frames):
            return name
    return LOOP


def stop_of(frame: str) -> str:
    """What an innermost frame is: a socket system call, compiled driver code, the interpreter,
    or Python (ours: `authoric/`)."""
    if frame.startswith(WRITES):
        return "socket writes (system calls)"
    if frame.startswith(READS):
        return "socket reads (system calls)"
    if "(asyncpg/" in frame and ".py:" in frame:
        return "Python: asyncpg"
    if ".py:" in frame or "(<" in frame:
        return "Python: ours" if "(authoric/" in frame else "Python: other packages"
    if any(f"({name}" in frame for name in ("protocol.c", "pgproto.c", "recordobj.c")):
        return "asyncpg, compiled"
    if "(loop.c" in frame or frame.startswith("uv") or "(core.c" in frame or "(stream.c" in frame:
        return "uvloop, compiled"
    return "the interpreter and C library"


def split(lines: Iterable[str]) -> WorkerSplit:
    """A worker's split from py-spy's raw output (one `frame;frame;... count` per line)."""
    out = WorkerSplit()
    for frames, n in samples(lines):
        if idle(frames):
            continue
        out.busy += n
        area = area_of(frames)
        out.areas[area] += n
        if area == AREAS[0][0]:
            out.stops[stop_of(frames[-1])] += n
            if "(authoric/" in frames[-1]:
                out.ours[frames[-1]] += n
    return out


def report(pid: int, s: WorkerSplit, rate_hz: int, seconds: float, top: int = 12) -> str:
    """A worker's split as text: shares of its busy samples, and of its pass."""
    if not s.busy:
        return f"worker {pid}: no busy sample"
    lines = [f"worker {pid}: {s.busy} busy samples ({s.busy / rate_hz:.2f} s sampled in "
             f"{seconds:g} s)"]
    lines += [f"  {n:6d}  {n / s.busy:6.1%}  {name}" for name, n in s.areas.most_common()]
    passed = s.areas[AREAS[0][0]]
    if passed:
        lines.append(f"  the pass, by where its samples stopped ({passed}):")
        lines += [f"    {n:6d}  {n / passed:6.1%}  {name}" for name, n in s.stops.most_common()]
        lines.append("  the pass's most sampled functions of ours (own samples):")
        lines += [f"    {n:6d}  {n / passed:6.1%}  {name}" for name, n in s.ours.most_common(top)]
    return "\n".join(lines)


def workers(root: int) -> list[int]:
    """The serving workers of the `authoric serve` in `root`'s process tree."""
    serve = [p for p in process_tree(root) if "authoric.cli serve" in command_line(p)]
    return serving_workers(serve[0]) if serve else []


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop(fanout: subprocess.Popen[bytes]) -> None:
    """End a fan-out run left running (this one was interrupted): as Ctrl-C would, once, so that
    it stops the server and the PostgreSQL it started; killed only if it does not end."""
    if fanout.poll() is not None:
        return
    fanout.send_signal(signal.SIGINT)
    try:
        fanout.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fanout.kill()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.feed_profile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writer", choices=("rest", "sql", "capture"), default="capture")
    ap.add_argument("--rate", type=float, default=50, help="writes per second (50)")
    ap.add_argument("--seconds", type=int, default=40, help="sampled seconds (40)")
    ap.add_argument("--rate-hz", type=int, default=200, help="py-spy samples per second (200)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="authoric-feed-profile-") as tmp:
        work = Path(tmp)
        log = work / "fanout.log"
        # The window outlasts the sampling: the streams are open and the writes steady
        # throughout, and the fan-out's own figures print at its end.
        with log.open("w") as out:
            fanout = subprocess.Popen(
                [sys.executable, "-m", "bench.fanout", "--rates", f"{args.rate:g}",
                 "--seconds", str(args.seconds + 20), "--warmup", "2", "--census", "0",
                 "--writer", args.writer], stdout=out, stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C here reaches only this process, whose `stop` then
                # interrupts the run once (a second interrupt could cut its cleanup short).
                # And Ctrl-C's default action, even where this process was started with it
                # ignored (in the background of a script), so that `stop` can reach it.
                start_new_session=True, preexec_fn=_interruptible)
        spies: list[subprocess.Popen[bytes]] = []
        try:
            while not OPENED.search(log.read_text()):
                if fanout.poll() is not None:
                    print(log.read_text())
                    return 1
                time.sleep(0.5)
            # bench.fanout first measures the idle streams (6 s), then warms up (2 s).
            time.sleep(8)
            pids = workers(fanout.pid)
            stacks = {pid: work / f"stacks-{pid}.txt" for pid in pids}
            spies += [record(pid, args.seconds, path, "raw", native=True, rate=args.rate_hz)
                      for pid, path in stacks.items()]
            for spy in spies:
                spy.wait()
            fanout.wait()
        finally:
            for spy in spies:
                if spy.poll() is None:
                    spy.send_signal(signal.SIGINT)  # py-spy stops recording on Ctrl-C
            stop(fanout)
        text = log.read_text()
        print(text[text.find("| rate |"):] if "| rate |" in text else text[-2000:])
        print(f"py-spy --native, {args.rate_hz} samples/s for {args.seconds} s, "
              f"{args.writer} writes at {args.rate:g}/s:\n")
        for pid, path in stacks.items():
            lines = path.read_text().splitlines() if path.exists() else []
            print(report(pid, split(lines), args.rate_hz, args.seconds) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
