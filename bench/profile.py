"""`python -m bench.profile`: where a request's CPU goes, by function.

Starts Authoric with one worker on a fresh embedded PostgreSQL, sets it up as `bench.peers`
does (a member confined to its org, a row policy, a redacted column), drives one route with
`wrk`, and samples the worker with py-spy meanwhile. Prints the functions that hold the most
samples, by own time and by time including callees, with the share of all samples; with
`--svg`, also writes a flame graph.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from bench.harness import database, process_tree, running_server, tree_cpu_seconds
from bench.peers import wrk
from bench.peers.systems import ROUTES, authoric_target


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench.profile", description=__doc__)
    ap.add_argument("--route", choices=ROUTES, default="read")
    ap.add_argument("--seconds", type=int, default=15, help="sampled seconds (15)")
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--top", type=int, default=40, help="functions listed (40)")
    ap.add_argument("--svg", type=Path, default=None, help="also write a flame graph here")
    ap.add_argument("--native", action="store_true",
                    help="sample C and Cython frames too (py-spy --native): splits the time "
                         "py-spy otherwise charges to the Python frame that called into C")
    return ap.parse_args(argv)


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise SystemExit("py-spy is missing: .venv/bin/pip install py-spy")
    return found


def serving_workers(server_pid: int) -> list[int]:
    """The server's Python children that serve requests: its workers, without
    multiprocessing's resource tracker (which waits in a blocking read that py-spy counts
    as busy)."""
    return [p for p in process_tree(server_pid) if p != server_pid
            and "python" in (line := command_line(p)) and "resource_tracker" not in line]


def worker_pid(server_pid: int) -> int:
    """The process serving requests: the server itself, or its only worker."""
    children = serving_workers(server_pid)
    return children[-1] if children else server_pid


def command_line(pid: int) -> str:
    """A process's command line as one string ("" once the process is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def record(pid: int, seconds: int, out: Path, fmt: str,
           native: bool = False, rate: int = 250) -> subprocess.Popen[bytes]:
    # --native reads the stack while the process is stopped, so it cannot be --nonblocking.
    return subprocess.Popen(
        [py_spy(), "record", "--pid", str(pid), "--duration", str(seconds), "--rate", str(rate),
         "--format", fmt, "--output", str(out), "--native" if native else "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def package_of(frame: str) -> str:
    """`name (pkg/module.py)` → `pkg`; the standard library's modules count as `python`."""
    path = frame.rpartition(" (")[2].rstrip(")")
    head = path.split("/")[0]
    return head if "/" in path and not head.startswith("<") else "python (stdlib)"


def samples(lines: Iterable[str]) -> Iterator[tuple[list[str], int]]:
    """py-spy's raw output (`frame;frame;... count` per line) as (frames, outermost first;
    how many samples had that stack)."""
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if stack:
            yield stack.split(";"), int(count)


def summarize(collapsed: Path, top: int) -> str:
    """Own and inclusive sample shares per function, and own time per package, from py-spy's
    collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    total = 0
    for stack, n in samples(collapsed.read_text().splitlines()):
        frames = [f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0] + ")"
                  if " (" in f else f for f in stack]
        total += n
        own[frames[-1]] += n
        packages[package_of(frames[-1])] += n
        for frame in set(frames):
            inclusive[frame] += n
    lines = [f"{total} samples", "", "own time by package:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in packages.most_common()]
    lines += ["", "own time:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in own.most_common(top)]
    lines += ["", "including callees:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="authoric-profile-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        with database(work) as db, \
                running_server(work, db, extra_args=["--workers", "1"]) as server:
            target = authoric_target(server, db)
            pid = worker_pid(server.pid)
            wrk.run(target, args.route, args.concurrency, 3, 1, work / "warm.lua")
            collapsed = work / "stacks.txt"
            spy = record(pid, args.seconds, collapsed, "raw", args.native)
            svg = (record(pid, args.seconds, args.svg, "flamegraph", args.native)
                   if args.svg else None)
            runs: list[wrk.Run] = []
            cpu_before = tree_cpu_seconds(server.pid)
            load = threading.Thread(target=lambda: runs.append(wrk.run(
                target, args.route, args.concurrency, args.seconds + 1, 1, work / "load.lua")))
            load.start()
            spy.wait()
            if svg:
                svg.wait()
            load.join()
            cpu = tree_cpu_seconds(server.pid) - cpu_before
            print(f"route {args.route}, concurrency {args.concurrency}, worker pid {pid}: "
                  f"{runs[0].rps:.0f} req/s, server {1000 * cpu / runs[0].requests:.2f} ms CPU "
                  "per request (PostgreSQL not included; py-spy running)")
            print(summarize(collapsed, args.top))


if __name__ == "__main__":
    main()
