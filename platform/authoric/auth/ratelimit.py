"""Login throttling: attempts counted per fixed window in PostgreSQL, shared by every process.

Two counters apply to each attempt at `/{app}/auth/token` (and the first to `/refresh`):
- per client address within the app (`AUTHORIC_TOKEN_RATE_LIMIT`), against one guesser;
- per account, the email within the app (`AUTHORIC_LOGIN_ACCOUNT_LIMIT`), against guessing
  one account's password from many addresses.
The account routes that send mail or redeem a mailed token (sign-up, resend, forgot, verify,
reset) count on two counters of their own, per client address (`AUTHORIC_MAIL_RATE_LIMIT`)
and per email (`AUTHORIC_MAIL_ACCOUNT_LIMIT`), so a burst of them neither floods one inbox
nor eats into the same person's sign-in attempts.
A third counter, per member (user and org), counts writes refused because a unique value is
held by a row the writer may not read (`AUTHORIC_HIDDEN_CONFLICT_LIMIT`): guesses at hidden
values through uniqueness.

Counts key on the app's uid as the database resolved it, so the name, the uid, or the uid
spelled differently all share one bucket, and an unknown app is a 404 before anything is
counted. Subjects are hashed, so a key has a fixed size whatever the client sends.

One statement per attempt resolves the app and bumps both counters (an upsert on an UNLOGGED
table), timed by the database's clock, the same for every replica. Rows of past windows are
deleted about once a window by each process, a bounded batch at a time.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.names import app_key
from authoric.errors import NotFound, TooManyRequests
from authoric.settings import Settings

CLIENT, ACCOUNT, HIDDEN_CONFLICT = "client", "account", "hidden_conflict"
MAIL_CLIENT, MAIL_ACCOUNT = "mail_client", "mail_account"
LOGIN, MAIL = (CLIENT, ACCOUNT), (MAIL_CLIENT, MAIL_ACCOUNT)  # (per client, per account)
PURGE_BATCH = 1000

# A counter's window opens at its first attempt and lasts $3 seconds (database clock,
# shared by every replica); the first attempt after it opens the next one. Windows aligned to
# the clock would let a burst straddle a boundary, and make "the N+1st attempt is refused"
# depend on when the attempts started.
# One attempt on the counter (app_uid, key), as the tail of an INSERT ... SELECT/VALUES.
# The statements are fixed, run as written (`exec_driver_sql`), with the same numbered
# parameters: $1 the app, $2 the counters' keys (or one key), $3 the window in seconds.
_BUMP = """
    ON CONFLICT (app_uid, key) DO UPDATE
    SET hits = CASE WHEN t.window_start > now() - make_interval(secs => CAST($3 AS integer))
                    THEN t.hits + 1 ELSE 1 END,
        window_start = CASE WHEN t.window_start > now() - make_interval(
                                 secs => CAST($3 AS integer))
                            THEN t.window_start ELSE now() END
    RETURNING t.key, t.hits, CAST(ceil(extract(epoch FROM t.window_start - now()))
                                  AS integer) + CAST($3 AS integer) AS retry
"""
_COUNT = """
WITH app AS (
    SELECT uid FROM {app_is}
), hit AS (
    INSERT INTO authoric.login_throttle AS t (app_uid, key, window_start, hits)
    SELECT app.uid, v.key, now(), 1 FROM app, unnest(CAST($2 AS bytea[])) AS v(key)
""" + _BUMP.replace("{", "{{").replace("}", "}}") + """)
SELECT app.uid, hit.key, hit.hits, hit.retry FROM app LEFT JOIN hit ON true
"""
_COUNT_BY_UID = _COUNT.format(app_is="authoric.apps WHERE uid = CAST($1 AS uuid)")
_COUNT_BY_NAME = _COUNT.format(app_is="authoric.apps WHERE name = $1")
_COUNT_ONE = ("INSERT INTO authoric.login_throttle AS t (app_uid, key, window_start, hits) "
              "VALUES ($1, $2, now(), 1)" + _BUMP)

# $1 the window in seconds, $2 how many rows at most.
_PURGE = """
DELETE FROM authoric.login_throttle WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM authoric.login_throttle
    WHERE window_start < now() - make_interval(secs => CAST($1 AS integer))
    LIMIT $2 FOR UPDATE SKIP LOCKED))
"""


def _key(kind: str, subject: str) -> bytes:
    return hashlib.sha256(f"{kind}\x00{subject}".encode()).digest()


@dataclass(frozen=True)
class Verdict:
    """The resolved app and whether this attempt is over a limit."""

    app_uid: uuid.UUID
    over: str | None  # the kind of limit passed (CLIENT, ACCOUNT, ...); None: go ahead
    retry_after: int

    def raise_if_over(self) -> None:
        if self.over is not None:
            retry = max(1, self.retry_after)
            raise TooManyRequests("too many attempts; slow down",
                                  {"retryAfter": retry, "limit": self.over},
                                  {"Retry-After": str(retry)})


class RateLimiter:
    """Counts login and refresh attempts; built once per process from the settings."""

    def __init__(self, settings: Settings) -> None:
        self.limits = {CLIENT: settings.token_rate_limit, ACCOUNT: settings.account_rate_limit,
                       HIDDEN_CONFLICT: settings.hidden_conflict_limit,
                       MAIL_CLIENT: settings.mail_rate_limit,
                       MAIL_ACCOUNT: settings.mail_account_limit}
        self.window = settings.rate_window
        self._next_purge = 0.0

    async def count(self, conn: AsyncConnection, app_ref: str, client: str,
                    account: str | None = None, kinds: tuple[str, str] = LOGIN) -> Verdict:
        """Count one attempt on `app_ref` (404 if there is no such app) by `client`, for
        `account` when given, on the (per client, per account) counters `kinds` (LOGIN or
        MAIL). Run it in a transaction of its own that commits, so that the attempt stays
        counted when the request then fails."""
        per_client, per_account = kinds
        subjects = {per_client: client}
        if account is not None:
            subjects[per_account] = account.strip().lower()
        kind_of = {_key(kind, subject): kind for kind, subject in subjects.items()}
        key = app_key(app_ref)
        if key is None:
            raise NotFound("no such app", {"app": app_ref})
        by_uid = isinstance(key, uuid.UUID)
        rows = (await conn.exec_driver_sql(_COUNT_BY_UID if by_uid else _COUNT_BY_NAME,
                                           (key, list(kind_of), self.window))).all()
        if not rows:
            raise NotFound("no such app", {"app": app_ref})
        over = [(r.retry, kind_of[bytes(r.key)]) for r in rows
                if r.key is not None and r.hits > self.limits[kind_of[bytes(r.key)]]]
        await self._purge_now_and_then(conn)
        if not over:
            return Verdict(rows[0].uid, None, 0)
        retry, kind = max(over)  # both passed: wait for the later window
        return Verdict(rows[0].uid, kind, int(retry))

    async def count_hidden_conflict(self, conn: AsyncConnection, app_uid: uuid.UUID,
                                    user_uid: uuid.UUID, org_uid: uuid.UUID) -> Verdict:
        """Count one write refused by a unique value that a row the writer may not read holds
        (the member's uniqueness guesses, REST and import alike). Its own committed
        transaction, like a login attempt: the refused write itself rolls back."""
        row = (await conn.exec_driver_sql(_COUNT_ONE, (
            app_uid, _key(HIDDEN_CONFLICT, f"{user_uid}\x00{org_uid}"), self.window))).one()
        over = HIDDEN_CONFLICT if row.hits > self.limits[HIDDEN_CONFLICT] else None
        return Verdict(app_uid, over, int(row.retry))

    async def _purge_now_and_then(self, conn: AsyncConnection) -> None:
        if time.monotonic() < self._next_purge:
            return
        self._next_purge = time.monotonic() + self.window
        await conn.exec_driver_sql(_PURGE, (self.window, PURGE_BATCH))

