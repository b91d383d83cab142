"""Async engine construction with the server-wide session settings we rely on."""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from authoric.settings import Settings


def async_url(url: str) -> str:
    """The SQLAlchemy asyncpg URL for a libpq-style `postgresql://` URL."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """The plain `postgresql://` URL asyncpg connects with directly (relay, sequencer)."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def create_engine(settings: Settings, url: str) -> AsyncEngine:
    """An engine whose every connection carries the statement timeout."""
    return create_async_engine(
        async_url(url),
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        pool_pre_ping=True,
        hide_parameters=True,  # logged SQL errors must not carry row values (passwords, PII)
        connect_args={
            "server_settings": {
                "statement_timeout": str(settings.statement_timeout_ms),
                "application_name": "authoric",
            }
        },
    )
