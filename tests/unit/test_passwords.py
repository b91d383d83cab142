"""Password hashing: Argon2id at argon2-cffi's default cost in production, at its minimum cost
only when a test server asks (AUTHORIC_TEST_CHEAP_PASSWORD_HASHING), and a hash made at one
cost verifies under the other (a stored hash carries its own parameters)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from authoric.auth import passwords


@pytest.fixture(autouse=True)
def production_cost_after() -> Iterator[None]:
    yield
    passwords.install(cheap=False)


async def test_a_server_without_the_test_setting_hashes_at_argon2s_default_cost() -> None:
    passwords.install(cheap=False)
    stored = await passwords.hash_password("correct horse")

    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert await passwords.verify_password(stored, "correct horse")
    assert not await passwords.verify_password(stored, "wrong horse")
    assert not await passwords.verify_password(None, "correct horse")


async def test_a_test_server_hashes_argon2id_at_its_minimum_cost_and_says_so_in_its_log(
        caplog: pytest.LogCaptureFixture) -> None:
    passwords.install(cheap=True)
    stored = await passwords.hash_password("correct horse")

    assert stored.startswith("$argon2id$v=19$m=8,t=1,p=1$")
    assert await passwords.verify_password(stored, "correct horse")
    assert not await passwords.verify_password(stored, "wrong horse")
    assert not await passwords.verify_password(None, "correct horse")
    assert "TEST PASSWORD HASHING ON" in caplog.text


async def test_a_hash_stored_at_either_cost_verifies_at_the_other() -> None:
    passwords.install(cheap=False)
    dear = await passwords.hash_password("correct horse")
    passwords.install(cheap=True)
    cheap = await passwords.hash_password("correct horse")

    assert await passwords.verify_password(dear, "correct horse")
    passwords.install(cheap=False)
    assert await passwords.verify_password(cheap, "correct horse")
