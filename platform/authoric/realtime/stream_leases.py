"""The per-user stream cap for the whole deployment: leases in PostgreSQL.

`AUTHORIC_SSE_MAX_STREAMS_PER_USER` bounds the subscribe streams one user holds open in one
app across every worker and replica. Each open stream holds a lease, a row of the UNLOGGED
table `authoric.stream_leases` that expires `AUTHORIC_SSE_LEASE_TTL` seconds after it was
last renewed:

- opening a stream takes a lease in one short transaction (two statements): a per-user
  advisory lock, then one statement that deletes the user's expired leases, counts the live
  ones and inserts the new one only under the cap; else 429, whose `Retry-After` is when the
  first live lease lapses (at most 30 s), so a client whose streams died with a killed
  process is back as soon as their leases lapse;
- each process renews the leases of its open streams in one statement every third of the
  TTL, whatever the number of streams; events cost nothing;
- closing a stream deletes its lease (one statement, in the background); a process that is
  killed renews nothing, so its leases lapse and its slots are free within one TTL.

The count uses the database's clock, the same for every replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from authoric.errors import TooManyRequests
from authoric.policy.principal import Principal
from authoric.settings import Settings

log = logging.getLogger("authoric")

# Fixed statements, run as written (`exec_driver_sql`), their parameters numbered.
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"  # $1: the user's key
# $1 app, $2 user, $3 the new lease's id, $4 process, $5 TTL in seconds, $6 the cap.
_TAKE = """
WITH lapsed AS (
    DELETE FROM authoric.stream_leases
    WHERE app_uid = $1 AND user_uid = $2 AND expires_at <= now()
), live AS (
    SELECT count(*) AS n FROM authoric.stream_leases
    WHERE app_uid = $1 AND user_uid = $2 AND expires_at > now()
)
INSERT INTO authoric.stream_leases (id, app_uid, user_uid, process, expires_at)
SELECT $3, $1, $2, $4, now() + make_interval(secs => $5)
FROM live WHERE live.n < $6
RETURNING id
"""
# When the user's first live lease lapses (unless renewed): the earliest a slot can come free
# without a close, so the 429's Retry-After for a killed process's streams is not a guess.
# $1 app, $2 user.
_FIRST_LAPSE = """
SELECT ceil(extract(epoch FROM min(expires_at) - now()))::int
FROM authoric.stream_leases
WHERE app_uid = $1 AND user_uid = $2 AND expires_at > now()
"""
# $1 TTL in seconds, $2 the leases' ids.
_RENEW = ("UPDATE authoric.stream_leases SET expires_at = now() + make_interval(secs => $1) "
          "WHERE id = ANY($2)")
_RELEASE = "DELETE FROM authoric.stream_leases WHERE id = ANY($1)"  # $1: the leases' ids


@dataclass(eq=False)
class Lease:
    """One open stream's slot; `release` is idempotent and never waits."""

    owner: StreamLeases
    id: uuid.UUID
    released: bool = field(default=False)

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.owner.release(self)


class StreamLeases:
    """This process's leases: taken, renewed and released in PostgreSQL."""

    def __init__(self, engine: AsyncEngine, settings: Settings,
                 retry_after: int = 30) -> None:
        self.engine, self.cap, self.ttl = engine, settings.sse_max_streams_per_user, settings.sse_lease_ttl
        self.retry_after = retry_after
        self.process = uuid.uuid4()
        self._held: set[uuid.UUID] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._renewer: asyncio.Task[None] | None = None

    async def take(self, principal: Principal) -> Lease:
        """A lease for one more stream of this user in this app; 429 at the cap."""
        lease_id = uuid.uuid4()
        who = (principal.app_uid, principal.user_uid)
        async with self.engine.begin() as conn:
            await conn.exec_driver_sql(_LOCK, (f"stream:{who[0]}:{who[1]}",))
            taken = (await conn.exec_driver_sql(
                _TAKE, (*who, lease_id, self.process, float(self.ttl), self.cap))).first()
            lapse = None if taken is not None else (
                await conn.exec_driver_sql(_FIRST_LAPSE, who)).scalar()
        if taken is None:
            raise TooManyRequests(
                f"this user already has {self.cap} open streams; close one first",
                {"limit": self.cap}, headers={"Retry-After": str(self.wait_seconds(lapse))})
        self._held.add(lease_id)
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._renew())
        return Lease(self, lease_id)

    def wait_seconds(self, first_lapse: int | None) -> int:
        """Retry-After for a refused stream: when the first lease lapses, within [1, retry_after]
        (a live stream's lease is renewed, so asking again later than that is no better)."""
        return max(1, min(self.retry_after, first_lapse if first_lapse is not None else 1))

    def release(self, lease: Lease) -> None:
        self._held.discard(lease.id)
        task = asyncio.get_running_loop().create_task(self._delete([lease.id]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _delete(self, ids: list[uuid.UUID]) -> None:
        try:
            async with self.engine.begin() as conn:
                await conn.exec_driver_sql(_RELEASE, (ids,))
        except Exception:  # the lease lapses within one TTL anyway
            log.warning("could not release stream leases; they lapse on their own", exc_info=True)

    async def _renew(self) -> None:
        """Every third of the TTL, push the expiry of every lease still held; stop when none."""
        while self._held:
            await asyncio.sleep(self.ttl / 3)
            if not self._held:
                break
            try:
                async with self.engine.begin() as conn:
                    await conn.exec_driver_sql(_RENEW, (float(self.ttl), list(self._held)))
            except Exception:  # the next round tries again; a lease lapses only after a TTL
                log.warning("could not renew stream leases", exc_info=True)

    async def stop(self) -> None:
        """At shutdown: stop renewing and release what is still held."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
        if self._held:
            await self._delete(list(self._held))
            self._held.clear()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
