"""The Markdown tables: figures side by side with the ratio Authoric/PocketBase, where the
CPU went during each cell, and idle CPU."""

from __future__ import annotations

from bench.peers.measure import Cell, Idle, cores

OURS, THEIRS = "Authoric", "PocketBase"
ROUTE_NAMES = {"read": "read one", "list": "list 20", "create": "create", "signin": "sign in"}


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


def _errors(cell: Cell) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(cell.errors.items()))


def figures_table(cells: list[Cell], ours: str = OURS, base: str = THEIRS) -> str:
    """One row per (route, concurrency): req/s, p50/p99, CPU ms/req of both, and the ratios
    `ours`/`base` (Authoric/PocketBase; or an API key's requests against a token's)."""
    by_key = {(c.route, c.concurrency, c.system): c for c in cells}
    lines = [
        f"| route | conc | {base} req/s | {ours} req/s | req/s {ours}/{base} "
        f"| {base} p50 / p99 ms | {ours} p50 / p99 ms | {base} CPU ms/req "
        f"| {ours} CPU ms/req | CPU {ours}/{base} | errors |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for (route, conc, system), b in by_key.items():
        if system != base:
            continue
        o = by_key[(route, conc, ours)]
        errors = "; ".join(f"**{c.system}: {_errors(c)}**" for c in (b, o) if c.errors)
        lines.append(
            f"| {ROUTE_NAMES[route]} | {conc} | {b.rps:,.0f} | {o.rps:,.0f} | "
            f"{_ratio(o.rps, b.rps)} | {b.p50:.1f} / {b.p99:.1f} | "
            f"{o.p50:.1f} / {o.p99:.1f} | {b.cpu_ms:.2f} | {o.cpu_ms:.2f} | "
            f"{_ratio(o.cpu_ms, b.cpu_ms)} | {errors or 'none'} |")
    return "\n".join(lines)


def cpu_table(cells: list[Cell], with_postgres: tuple[str, ...] = (OURS,)) -> str:
    """Where the CPU went during each system's slices, in % of one core."""
    lines = [
        "| route | conc | system | server | PostgreSQL | the other system (idle) | wrk "
        "| everything else | idle |",
        "|---|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for c in cells:
        idle = max(0.0, cores() * 100 - c.share(c.machine_cpu))
        postgres = f"{c.share(c.postgres_cpu):.0f}%" if c.system in with_postgres else "-"
        lines.append(
            f"| {ROUTE_NAMES[c.route]} | {c.concurrency} | {c.system} | "
            f"{c.share(c.server_cpu):.0f}% | {postgres} | {c.share(c.peer_cpu):.0f}% | "
            f"{c.share(c.client_cpu):.0f}% | {c.share(c.other):.0f}% | {idle:.0f}% |")
    return "\n".join(lines)


def idle_table(idle: list[Idle]) -> str:
    lines = ["| system | server | PostgreSQL | total |", "|---|--:|--:|--:|"]
    for i in idle:
        postgres = f"{i.postgres:.1f}%" if i.system == OURS else "-"
        lines.append(f"| {i.system} | {i.server:.1f}% | {postgres} | {i.server + i.postgres:.1f}% |")
    return "\n".join(lines)


def flagged(cells: list[Cell]) -> list[str]:
    """A line per cell that had a non-2xx answer or a socket error, measured or in warm-up."""
    out = []
    for c in cells:
        if c.errors or c.warmup_errors:
            out.append(f"{c.system} {ROUTE_NAMES[c.route]} c={c.concurrency}: "
                       f"measured {dict(c.errors) or 'none'}, warm-up {dict(c.warmup_errors) or 'none'}")
    return out
