"""Measuring: the interleaved slices of each cell, the CPU each system used, and idle CPU.

A cell is one (route, concurrency). Each system gets `rounds` slices of it, in the order
A B B A ... (the cell after starts with the other system), so a change in the machine's
other load falls on both alike. Each slice is a warm-up wrk run whose figures are dropped,
then the measured wrk run, with the CPU of both systems read from /proc just before and just
after it. Both systems stay up the whole time: the one not under load is the "peer", and
what it burns meanwhile (idle work) is reported in its own column.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import machine_busy_seconds
from bench.peers import wrk
from bench.peers.systems import CpuReading, Target


@dataclass
class Cell:
    """One system's figures for one (route, concurrency), summed over its slices."""

    system: str
    route: str
    concurrency: int
    requests: int = 0
    seconds: float = 0.0  # wrk's measured duration
    wall: float = 0.0  # the CPU window (wrk start to exit)
    server_cpu: float = 0.0
    postgres_cpu: float = 0.0
    peer_cpu: float = 0.0  # the other system, meanwhile
    client_cpu: float = 0.0  # wrk
    machine_cpu: float = 0.0  # every process on the machine
    percentiles: list[tuple[int, float, float]] = field(default_factory=list)  # (n, p50, p99)
    errors: Counter[str] = field(default_factory=Counter)
    warmup_errors: Counter[str] = field(default_factory=Counter)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms(self) -> float:
        """Server + PostgreSQL CPU milliseconds per completed request."""
        return (self.server_cpu + self.postgres_cpu) * 1000 / self.requests if self.requests else 0.0

    def _weighted(self, index: int) -> float:
        """A percentile over the slices: exact with one slice, otherwise the slices' own
        percentiles weighted by their request counts (wrk gives no mergeable histogram)."""
        total = sum(p[0] for p in self.percentiles)
        return sum(p[0] * p[index] for p in self.percentiles) / total if total else float("nan")

    @property
    def p50(self) -> float:
        return self._weighted(1)

    @property
    def p99(self) -> float:
        return self._weighted(2)

    def share(self, seconds: float) -> float:
        """CPU seconds over this cell's window as % of one core."""
        return seconds / self.wall * 100 if self.wall else 0.0

    @property
    def other(self) -> float:
        return max(0.0, self.machine_cpu - self.server_cpu - self.postgres_cpu - self.peer_cpu
                   - self.client_cpu)

    def add(self, measured: Slice) -> None:
        self.requests += measured.run.requests
        self.seconds += measured.run.seconds
        self.wall += measured.wall
        self.server_cpu += measured.server
        self.postgres_cpu += measured.postgres
        self.peer_cpu += measured.peer
        self.client_cpu += measured.run.client_cpu
        self.machine_cpu += measured.machine
        self.percentiles.append((measured.run.requests, measured.run.p50_ms, measured.run.p99_ms))
        self.errors.update(measured.run.errors)


@dataclass
class Settings:
    duration: float  # measured seconds per cell and system
    rounds: int
    warmup: float  # seconds per slice
    threads: int  # wrk threads
    work: Path  # where the Lua scripts go


def slice_order(cell_index: int, rounds: int, targets: list[Target]) -> list[Target]:
    """A B B A ... for even cells, B A A B ... for odd ones."""
    order = []
    for r in range(rounds):
        pair = targets if (cell_index + r) % 2 == 0 else targets[::-1]
        order.extend(pair)
    return order


@dataclass
class Slice:
    """One measured wrk run against one system, with the CPU used meanwhile (seconds)."""

    run: wrk.Run
    wall: float
    server: float
    postgres: float
    peer: float
    machine: float

    @property
    def other(self) -> float:
        return max(0.0, self.machine - self.server - self.postgres - self.peer
                   - self.run.client_cpu)

    def describe(self, cell: Cell, target: Target, peer: Target) -> str:
        def share(seconds: float) -> str:
            return f"{seconds / self.wall * 100:3.0f}%"

        flag = f"  ERRORS {dict(self.run.errors)}" if self.run.errors else ""
        cpu_ms = (self.server + self.postgres) * 1000 / max(1, self.run.requests)
        return (f"  {cell.route:<6} c={cell.concurrency:<3} {target.name:<10} "
                f"{self.run.rps:8.0f} req/s  p50 {self.run.p50_ms:7.1f} ms  "
                f"p99 {self.run.p99_ms:7.1f} ms  CPU {cpu_ms:5.2f} ms/req  (wrk "
                f"{share(self.run.client_cpu)}, {peer.name} {share(self.peer)}, "
                f"other {share(self.other)} of a core){flag}")


def measure_slice(cell: Cell, target: Target, peer: Target, settings: Settings) -> Slice:
    """A warm-up run (its errors kept, its figures dropped), then the measured run with both
    systems' CPU read just before and just after it."""
    script = settings.work / f"{target.name.lower()}-{cell.route}.lua"
    if settings.warmup > 0:
        warm = wrk.run(target, cell.route, cell.concurrency, settings.warmup, settings.threads,
                       script)
        cell.warmup_errors.update(warm.errors)
    seconds = max(1.0, round(settings.duration / settings.rounds))
    before: tuple[CpuReading, CpuReading] = (target.cpu(), peer.cpu())
    machine_before, wall_before = machine_busy_seconds(), time.perf_counter()
    result = wrk.run(target, cell.route, cell.concurrency, seconds, settings.threads, script)
    wall, machine = time.perf_counter() - wall_before, machine_busy_seconds() - machine_before
    after = (target.cpu(), peer.cpu())
    server, postgres = target.used(before[0], after[0])
    # Two ways into one server (a token and an API key): the peer is this very server.
    idle_peer = 0.0 if peer.server_pid == target.server_pid else sum(peer.used(before[1], after[1]))
    return Slice(result, wall, server, postgres, idle_peer, machine)


def measure_cells(targets: list[Target], routes: list[str], concurrencies: list[int],
                  settings: Settings) -> list[Cell]:
    cells: list[Cell] = []
    index = 0
    for route in routes:
        for concurrency in concurrencies:
            mine = {t.name: Cell(t.name, route, concurrency) for t in targets}
            for target in slice_order(index, settings.rounds, targets):
                peer = next(t for t in targets if t is not target)
                cell = mine[target.name]
                measured = measure_slice(cell, target, peer, settings)
                cell.add(measured)
                print(measured.describe(cell, target, peer), flush=True)
            cells.extend(mine.values())
            index += 1
    return cells


@dataclass
class Idle:
    system: str
    server: float  # % of one core
    postgres: float
    seconds: float


def measure_idle(targets: list[Target], seconds: float, settle: float) -> list[Idle]:
    """Every system's CPU over the same `seconds` with no clients, after `settle` seconds."""
    time.sleep(settle)
    before = [t.cpu() for t in targets]
    start = time.perf_counter()
    time.sleep(seconds)
    after = [t.cpu() for t in targets]
    wall = time.perf_counter() - start
    out = []
    for target, b, a in zip(targets, before, after, strict=True):
        server, database = target.used(b, a)
        out.append(Idle(target.name, server / wall * 100, database / wall * 100, wall))
    return out


def cores() -> int:
    return os.cpu_count() or 1
