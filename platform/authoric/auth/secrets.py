"""Server secrets (JWT signing key, admin token): from the environment, else kept in the data dir."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from authoric.settings import Settings

# Below these a secret can be guessed offline (a JWT's HMAC key) or online (the admin token).
MIN_JWT_SECRET_BYTES = 32
MIN_ADMIN_TOKEN_CHARS = 24


class WeakSecret(SystemExit):
    """A configured secret is too short: the server refuses to start (exit status 1)."""


def refuse_weak_secrets(settings: Settings) -> None:
    """Exit with a clear message when a secret given in the environment is too short.

    Generated secrets are 43 characters; this catches `AUTHORIC_JWT_SECRET=changeme`."""
    jwt = settings.jwt_secret
    if jwt is not None and len(jwt.encode()) < MIN_JWT_SECRET_BYTES:
        raise WeakSecret(f"authoric: AUTHORIC_JWT_SECRET is {len(jwt.encode())} bytes long; it "
                         f"must be at least {MIN_JWT_SECRET_BYTES} bytes (e.g. the output of "
                         "`openssl rand -base64 48`). Refusing to start.")
    admin = settings.admin_token
    if admin is not None and len(admin) < MIN_ADMIN_TOKEN_CHARS:
        raise WeakSecret(f"authoric: AUTHORIC_ADMIN_TOKEN is {len(admin)} characters long; it "
                         f"must be at least {MIN_ADMIN_TOKEN_CHARS} characters. "
                         "Refusing to start.")


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
    refuse_weak_secrets(settings)
    return settings.jwt_secret or _kept(settings.secret_file("jwt_secret"))


def admin_token(settings: Settings) -> str:
    refuse_weak_secrets(settings)
    return settings.admin_token or _kept(settings.secret_file("admin_token"))
