"""Apply or revert the platform migrations (Alembic, `migrations/`)."""

from __future__ import annotations

from alembic import command
from alembic.config import Config

from authoric.shipped import shipped_dir


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(shipped_dir("migrations")))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url), revision)
