"""Process figures for the benches, from Linux /proc: CPU time of a process tree, how busy
the machine is, resident memory, and the open-files limit.
"""

from __future__ import annotations

import os
import resource
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = defaultdict(list)
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat(int(entry.name))):
            tree[int(fields[1])].append(int(entry.name))
    return tree


def tree_cpu(root: int | None, tree: dict[int, list[int]] | None = None) -> float:
    """User + system CPU seconds of `root` and its descendants (live, or exited and reaped)."""
    if root is None:
        return 0.0
    tree = _children() if tree is None else tree
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        if fields := _stat(pid):
            # own CPU + that of children already reaped (backends that exited, workers)
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        stack.extend(tree.get(pid, []))
    return total / CLK_TCK


def machine_busy() -> float:
    first = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(first) - first[3] - first[4]) / CLK_TCK


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
        tree = _children()
        own = os.times()
        return cls(own.user + own.system, tree_cpu(server_pid, tree), tree_cpu(db_pid, tree),
                   machine_busy(), time.perf_counter())

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
