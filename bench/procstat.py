"""Process figures for the benches, from Linux /proc: the CPU the load generator, the server,
PostgreSQL and the machine used (`Cpu`, read through bench.harness), resident memory, and the
open-files limit.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import machine_busy_seconds, process_children, tree_cpu_seconds

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_cpu(root: int | None, tree: dict[int, list[int]] | None = None) -> float:
    """User + system CPU seconds of `root` and its descendants (live, or exited and reaped);
    0 without a process (no embedded PostgreSQL)."""
    return 0.0 if root is None else tree_cpu_seconds(root, tree)


def rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


@dataclass
class Cpu:
    """CPU seconds used so far by the load generator, the server, PostgreSQL, the machine."""

    client: float
    server: float
    database: float
    machine: float
    wall: float

    @classmethod
    def take(cls, server_pid: int, db_pid: int | None) -> Cpu:
        tree = process_children()
        own = os.times()
        return cls(own.user + own.system, tree_cpu(server_pid, tree), tree_cpu(db_pid, tree),
                   machine_busy_seconds(), time.perf_counter())

    def since(self, before: Cpu) -> dict[str, float]:
        """Cores used per role over the interval (1.0 = one core busy)."""
        span = self.wall - before.wall
        out = {k: (getattr(self, k) - getattr(before, k)) / span
               for k in ("client", "server", "database", "machine")}
        out["other"] = max(0.0, out["machine"] - out["client"] - out["server"] - out["database"])
        return out


def raise_nofile(want: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(want, hard) if hard != resource.RLIM_INFINITY else want
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
