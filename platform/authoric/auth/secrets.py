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
    if settings.jwt_secret:
        return Secret(settings.jwt_secret, False, None)
    return _kept(settings.secret_file("jwt_secret"))


def admin_token_source(settings: Settings) -> Secret:
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
