"""The embedded PostgreSQL (the `pgserver` package) used when no DATABASE_URL is given."""

from __future__ import annotations

from pathlib import Path


def embedded_database_url(data_dir: Path) -> str:
    """Start (or reuse) the embedded server whose files live under `data_dir/pg`."""
    import pgserver  # imported lazily: only needed without DATABASE_URL

    pg_dir = (data_dir / "pg").resolve()
    pg_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(pg_dir, cleanup_mode=None)
    return str(server.get_uri())
