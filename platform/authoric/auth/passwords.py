"""Password hashing with Argon2id (argon2-cffi), off the event loop.

Argon2 is deliberately slow (tens to hundreds of milliseconds); it runs in a worker thread
(argon2-cffi releases the GIL) so a login never stalls the process's other requests and
streams.

The hasher is argon2-cffi's default (RFC 9106's low-memory profile) unless a test server
asked for Argon2's minimum cost (`AUTHORIC_TEST_CHEAP_PASSWORD_HASHING`, see `install`):
still Argon2id, and a stored hash carries its own parameters, so verifying works either way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import anyio.to_thread
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

log = logging.getLogger("authoric")


@dataclass(frozen=True)
class _Hashing:
    hasher: PasswordHasher
    # Verified against when the email is unknown, so both failures cost the same time.
    dummy: str


_hashing: _Hashing | None = None  # built on first use, or by `install`


def install(cheap: bool) -> None:
    """Hash with Argon2's minimum cost from now on (`cheap`, for test servers: a suite logs in
    thousands of users; one pass over 8 KiB, full-length salt and hash) or argon2-cffi's
    default parameters (as in production)."""
    global _hashing
    if cheap:
        log.warning("TEST PASSWORD HASHING ON: Argon2id at its minimum cost; "
                    "never in production")
    hasher = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1) if cheap else PasswordHasher()
    _hashing = _Hashing(hasher, hasher.hash("authoric-timing-equaliser"))


def _current() -> _Hashing:
    if _hashing is None:
        install(cheap=False)
    assert _hashing is not None
    return _hashing


async def hash_password(password: str) -> str:
    return await anyio.to_thread.run_sync(_current().hasher.hash, password)


async def verify_password(stored: str | None, password: str) -> bool:
    return await anyio.to_thread.run_sync(_verify, stored, password)


def _verify(stored: str | None, password: str) -> bool:
    hashing = _current()
    try:
        return hashing.hasher.verify(stored or hashing.dummy, password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False
