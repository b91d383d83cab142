"""Database connections: the SQLAlchemy engine (transactions of several statements, admin
routes) and the session settings every connection carries, the request path's pool too.

No connection is pinged before use (a ping is a round trip on every checkout); a connection
that died is found when it fails, and the pool replaces it.
"""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from authoric.db.changelog import PLATFORM_WRITE
from authoric.settings import Settings

# A transaction left idle this long (a client that stalled mid-request, a bug) is ended by
# PostgreSQL, so it cannot hold row locks or a pooled connection for ever.
IDLE_IN_TRANSACTION_MS = 60_000


def async_url(url: str) -> str:
    """The SQLAlchemy asyncpg URL for a libpq-style `postgresql://` URL."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """The plain `postgresql://` URL asyncpg connects with directly (relay, sequencer)."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def session_settings(settings: Settings) -> dict[str, str]:
    """The PostgreSQL settings of every pooled connection."""
    return {
        "statement_timeout": str(settings.statement_timeout_ms),
        "idle_in_transaction_session_timeout": str(IDLE_IN_TRANSACTION_MS),
        "application_name": "authoric",
        # The platform files its own writes in the change log: SQL capture's triggers skip
        # this connection's statements (changes/capture.py).
        PLATFORM_WRITE: "on",
    }


def create_engine(settings: Settings, url: str) -> AsyncEngine:
    """An engine whose every connection carries the session settings."""
    return create_async_engine(
        async_url(url),
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        # The request path's reads and writes, and the feed's judge, run on the asyncpg pool
        # (plan/runner.py), which retries a read on a dead connection. This engine serves the
        # rest (stream opening, admin, leases): after a PostgreSQL restart, a checkout must not
        # hand out a dead connection (before, the feed's per-batch checkout found it first).
        pool_pre_ping=True,
        hide_parameters=True,  # logged SQL errors must not carry row values (passwords, PII)
        connect_args={"server_settings": session_settings(settings)},
    )
