"""Server secrets (JWT signing key, admin token): from the environment, else kept in the data dir."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from authoric.settings import Settings


def _kept(path: Path) -> str:
    """The secret stored at `path`, created (mode 0600) on first use."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)
    return value


def jwt_secret(settings: Settings) -> str:
    return settings.jwt_secret or _kept(settings.secret_file("jwt_secret"))


def admin_token(settings: Settings) -> str:
    return settings.admin_token or _kept(settings.secret_file("admin_token"))
