"""The server's notion of "now" for token lifetimes, and the test-only hook that moves it.

Token expiry is the one place where the suite needs time to pass. Instead of short lifetimes
and sleeps (which fail on a busy machine), a test starts a server with
`AUTHORIC_TEST_CLOCK_FILE` naming a file that holds a number of seconds; `now()` adds that
offset to the wall clock, so writing `120` into the file makes every token 120 s older.

Off by default. It is on only when that variable names an existing file at start-up; the
server logs a warning on every start with it on. Nothing else reads the file.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

log = logging.getLogger("authoric")

# Set once per process by `install` (from the lifespan); None: the plain wall clock.
_offset_file: Path | None = None


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
    if _offset_file is None:
        return time.time()
    text = _offset_file.read_text().strip()
    return time.time() + (float(text) if text else 0.0)
