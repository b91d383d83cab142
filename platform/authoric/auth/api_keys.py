"""API keys as bearers (section 3b): a presented key → the claims of the principal it is.

A key is `ak_` + 32 random bytes (URL-safe base64); only its SHA-256 is kept. A request finds
its key by that hash with one indexed lookup, and the answer is kept for a few seconds
(`ApiKeys`), forgotten at once when any process says the app's keys or members changed (the
relay's policy NOTIFY, `Hub.policy_listeners`). The cache is never trusted alone: a key acts
as a member does, and every statement planned for it checks that it still exists
(plan/guard.py reads members and keys alike), so a revoked key is refused by the next request
on every replica.

`lastUsedAt` is written at most once a minute per key, in the background, never on the
request's path.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from authoric import clock
from authoric.auth.tokens import ACCESS, Claims
from authoric.db import tables as t
from authoric.errors import TokenExpired, Unauthenticated

log = logging.getLogger("authoric")

PREFIX = "ak_"
KEY_BYTES = 32
CACHED_FOR = 10.0  # seconds a resolved key is reused before it is looked up again
TOUCH_EVERY = 60.0  # seconds between two writes of a key's lastUsedAt
CACHE_SIZE = 10_000


def is_api_key(token: str) -> bool:
    return token.startswith(PREFIX)


def new_key() -> str:
    """A fresh key, shown to its creator once."""
    return PREFIX + secrets.token_urlsafe(KEY_BYTES)


def key_hash(key: str) -> bytes:
    """What is kept of a key: its SHA-256. (The key has 256 bits of entropy, so a fast hash
    is enough; a lookup by hash compares in the index, not by a timing-visible loop.)"""
    return hashlib.sha256(key.encode()).digest()


@dataclass(frozen=True)
class _Resolved:
    claims: Claims
    until: float  # monotonic time after which the key is looked up again


class ApiKeys:
    """Keys resolved by hash, cached briefly, forgotten when their app's keys change."""

    def __init__(self, engine: AsyncEngine, writing: Callable[[], None] = lambda: None) -> None:
        self.engine = engine
        # Told of each lastUsedAt write this process starts (a metric; tests read it).
        self.writing = writing
        # By the key as presented (as VerifiedTokens keeps tokens): a hit costs no hashing.
        self._resolved: dict[str, _Resolved] = {}
        self._touched: dict[uuid.UUID, float] = {}  # key uid → clock time of the last write
        self._tasks: set[asyncio.Task[None]] = set()

    async def claims(self, key: str) -> Claims:
        """The claims a key acts with; 401 for an unknown (or revoked) key, 401
        `TOKEN_EXPIRED` for an expired one."""
        cached = self._resolved.get(key)
        if cached is None or cached.until <= time.monotonic():
            claims = await self._lookup(key_hash(key))
            if len(self._resolved) >= CACHE_SIZE:
                self._resolved.pop(next(iter(self._resolved)))
            cached = self._resolved[key] = _Resolved(claims, time.monotonic() + CACHED_FOR)
        claims = cached.claims
        now = clock.now()
        if claims.expires_at <= now:
            raise TokenExpired("the API key has expired")
        self._touch(claims.user_uid, now)
        return claims

    async def _lookup(self, digest: bytes) -> Claims:
        k = t.api_keys
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(k.c.uid, k.c.app_uid, k.c.org_uid, k.c.expires_at)
                                      .where(k.c.key_hash == digest))).first()
        if row is None:
            raise Unauthenticated("unknown or revoked API key")
        expires = row.expires_at.timestamp() if row.expires_at is not None else float("inf")
        return Claims(row.app_uid, row.uid, row.org_uid, row.uid, expires, ACCESS,
                      membership=row.uid, api_key=True)

    def forget(self, app_uids: set[uuid.UUID] | None) -> None:
        """The apps' keys (None: any app's) may have changed (a policy NOTIFY): look their
        keys up again."""
        self._resolved = {} if app_uids is None else {
            k: r for k, r in self._resolved.items() if r.claims.app_uid not in app_uids}

    def _touch(self, uid: uuid.UUID, now: float) -> None:
        """Write the key's lastUsedAt if this process has not in the last minute (the
        statement itself skips a write another process made within the minute)."""
        if now - self._touched.get(uid, float("-inf")) < TOUCH_EVERY:
            return
        if len(self._touched) >= CACHE_SIZE:
            self._touched.pop(next(iter(self._touched)))
        self._touched[uid] = now
        self.writing()
        task = asyncio.get_running_loop().create_task(self._write_last_used(uid, now))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_last_used(self, uid: uuid.UUID, now: float) -> None:
        k = t.api_keys
        at = datetime.fromtimestamp(now, UTC)
        earlier = datetime.fromtimestamp(now - TOUCH_EVERY, UTC)
        try:
            async with self.engine.begin() as conn:
                await conn.execute(update(k).where(
                    k.c.uid == uid, or_(k.c.last_used_at.is_(None), k.c.last_used_at <= earlier))
                    .values(last_used_at=at))
        except Exception:  # a lost lastUsedAt is no reason to fail anyone's request
            log.exception("could not record an API key's last use")
