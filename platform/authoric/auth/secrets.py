"""Server secrets (JWT signing key, admin token): from the environment, else kept in the data dir.

A kept secret is created once, atomically: the value is written to a private temporary file
which is then hard-linked to its final name. `link` fails if the name exists, so of several
processes racing on an empty data directory exactly one creates the secret, and nobody ever
reads a half-written file (which `O_CREAT|O_EXCL` followed by a write would allow).
`authoric serve` creates both before it starts any worker (`ensure_secrets`); the workers
then only read.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Secret:
    value: str
    created: bool  # generated just now (and written to `path`)
    path: Path | None  # None: it came from the environment


def _kept(path: Path) -> Secret:
    """The secret stored at `path`, created (mode 0600) on first use."""
    with contextlib.suppress(FileNotFoundError):
        return Secret(path.read_text().strip(), False, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, value.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:  # another process won the race: its value is the one
        return Secret(path.read_text().strip(), False, path)
    finally:
        tmp.unlink()
    return Secret(value, True, path)


def jwt_secret_source(settings: Settings) -> Secret:
    refuse_weak_secrets(settings)
    if settings.jwt_secret:
        return Secret(settings.jwt_secret, False, None)
    return _kept(settings.secret_file("jwt_secret"))


def admin_token_source(settings: Settings) -> Secret:
    refuse_weak_secrets(settings)
    if settings.admin_token:
        return Secret(settings.admin_token, False, None)
    return _kept(settings.secret_file("admin_token"))


def jwt_secret(settings: Settings) -> str:
    return jwt_secret_source(settings).value


def admin_token(settings: Settings) -> str:
    return admin_token_source(settings).value


def ensure_secrets(settings: Settings) -> Secret:
    """Create whichever kept secrets are missing; return the admin token's source."""
    jwt_secret_source(settings)
    return admin_token_source(settings)
