"""A per-process sliding-window limiter for the token and refresh endpoints."""

from __future__ import annotations

import math
import time
from collections import deque

from authoric.errors import TooManyRequests


class RateLimiter:
    def __init__(self, limit: int, window: float = 60.0) -> None:
        self.limit, self.window = limit, window
        self._hits: dict[str, deque[float]] = {}

    def check(self, key: str) -> None:
        """Count one attempt for `key`; 429 with Retry-After past the limit."""
        now = time.monotonic()
        hits = self._hits.setdefault(key, deque())
        while hits and hits[0] <= now - self.window:
            hits.popleft()
        if len(hits) >= self.limit:
            retry = max(1, math.ceil(hits[0] + self.window - now))
            raise TooManyRequests("too many attempts; slow down", {"retryAfter": retry},
                                  {"Retry-After": str(retry)})
        hits.append(now)
        if len(self._hits) > 100_000:  # bound memory under address spraying
            self._hits = {k: v for k, v in self._hits.items() if v and v[-1] > now - self.window}
