"""Password hashing with Argon2id (argon2-cffi), off the event loop.

Argon2 is deliberately slow (tens to hundreds of milliseconds); it runs in a worker thread
(argon2-cffi releases the GIL) so a login never stalls the process's other requests and
streams."""

from __future__ import annotations

import anyio.to_thread
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()
# Verified against when the email is unknown, so both failures cost the same time.
_DUMMY = _hasher.hash("authoric-timing-equaliser")


async def hash_password(password: str) -> str:
    return await anyio.to_thread.run_sync(_hasher.hash, password)


async def verify_password(stored: str | None, password: str) -> bool:
    return await anyio.to_thread.run_sync(_verify, stored, password)


def _verify(stored: str | None, password: str) -> bool:
    try:
        return _hasher.verify(stored or _DUMMY, password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False
