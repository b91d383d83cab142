"""One lock per piece of work that writes into the repository's own tree (an `npm ci` into a
node_modules, `npm pack`'s dist/, a wheel build's build/ and egg-info): CI runs its two passes
at once (.ci/run), and two pytest sessions doing such work at the same moment would corrupt
each other's files. The lock is an flock on a file under .authoric-test/locks/, released when
its holder exits, however it exits."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

LOCKS = Path(__file__).resolve().parents[1] / ".authoric-test" / "locks"


@contextlib.contextmanager
def tree_lock(name: str) -> Iterator[None]:
    """Hold the lock named `name` (waiting for another session's) for the block."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    with (LOCKS / f"{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
