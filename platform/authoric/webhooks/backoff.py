"""When a failed delivery is tried again: full-jitter exponential backoff.

The n-th retry waits a uniformly random time in [base, min(cap, base * 2^n)]: never sooner
than 5 s, the bound doubling, at most 1 h apart (contract section 8). Full jitter above that
floor spreads the retries of many webhooks that failed together (a receiver's outage)
instead of sending them back in waves. The random source is passed in, so tests choose it.
"""

from __future__ import annotations

from collections.abc import Callable

BASE, CAP = 5.0, 3600.0


def ceiling(attempt: int, base: float = BASE, cap: float = CAP) -> float:
    """The longest wait after the `attempt`-th failure in a row (1 for the first)."""
    return min(cap, base * 2.0 ** min(max(attempt, 1), 60))


def retry_delay(attempt: int, random: Callable[[], float], base: float = BASE,
                cap: float = CAP) -> float:
    """Seconds to wait after the `attempt`-th failure in a row; `random` gives [0, 1)."""
    return base + random() * (ceiling(attempt, base, cap) - base)
