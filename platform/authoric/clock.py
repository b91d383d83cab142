"""The server's notion of "now" for token lifetimes, and the test-only hook that moves it.

Token expiry is the one place where the suite needs time to pass. Instead of short lifetimes
and sleeps (which fail on a busy machine), a test starts a server with
`AUTHORIC_TEST_CLOCK_FILE` naming a file that holds a number of seconds; `now()` adds that
offset to the wall clock, so writing `120` into the file makes every token 120 s older.

Off by default. It is on only when that variable names an existing file at start-up; the
server logs a warning on every start with it on. Nothing else reads the file.

A timer set for a time of this clock (a stream's `reauth` at its token's expiry) sleeps on the
wall clock until `expiry - offset()`. A test that moves the clock forward would leave it
ringing on the old schedule, so under the test clock such a timer wakes every
`recheck_after()` seconds to look at the clock again; on the wall clock it never needs to.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

log = logging.getLogger("authoric")

# Set once per process by `install` (from the lifespan); None: the plain wall clock.
_offset_file: Path | None = None
# Under the test clock, how long a timer set for a time of this clock sleeps at most.
RECHECK_SECONDS = 0.1


class ClockFileMissing(SystemExit):
    """AUTHORIC_TEST_CLOCK_FILE names no file: refuse to start rather than guess."""


def install(path: Path | None) -> None:
    """Use the offset kept in `path` from now on (None: the wall clock, as in production)."""
    global _offset_file
    if path is not None and not path.is_file():
        raise ClockFileMissing(f"AUTHORIC_TEST_CLOCK_FILE={path} names no file; the test "
                               "clock is for tests only and must not be set otherwise")
    if path is not None:
        log.warning("TEST CLOCK ON: token expiry follows the offset in %s; never in production",
                    path)
    _offset_file = path


def now() -> float:
    """Seconds since the epoch, shifted by the test clock's offset when it is on."""
    return time.time() + offset()


def offset() -> float:
    """How far this clock runs ahead of the wall clock: exactly 0.0 unless the test clock is
    on, then the seconds its file holds."""
    if _offset_file is None:
        return 0.0
    text = _offset_file.read_text().strip()
    return float(text) if text else 0.0


def recheck_after() -> float:
    """How long a timer set for a time of this clock may sleep before it looks at the clock
    again: for ever on the wall clock, RECHECK_SECONDS under the test clock (a test moves it)."""
    return math.inf if _offset_file is None else RECHECK_SECONDS
