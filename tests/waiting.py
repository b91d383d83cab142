"""Waiting on a condition the test cannot be told about (a database row, a receiver's log, a
server's mailbox): asked again every 20 ms until it holds. The timeout is wide, so only a bug
reaches it, never a slow machine."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """The first truthy value of `condition()`; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
