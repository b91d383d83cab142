"""Pure checks of what the console's server side never lets through: secrets in audit
details, and impersonation claims that are not what the server signs."""

from __future__ import annotations

import time
import uuid

import jwt
import pytest

from authoric.auth import tokens
from authoric.console.audit import sanitized
from authoric.errors import Unauthenticated

SECRET = "a-test-secret-that-is-long-enough-for-hs256"


def test_audit_details_lose_every_key_naming_a_secret_at_any_depth() -> None:
    details = {"email": "a@x.io", "password": "p", "passwordHash": "h", "nested": [
        {"refresh_token": "r", "access_token": "a", "apiKey": "k", "client-secret": "s",
         "Authorization": "Bearer x", "name": "kept"}],
        "settings": {"accessTokenTtl": 900, "refreshTokenTtl": 60}}
    assert sanitized(details) == {"email": "a@x.io", "nested": [{"name": "kept"}],
                                  "settings": {"accessTokenTtl": 900, "refreshTokenTtl": 60}}


def _claims(read_only: bool) -> tokens.Claims:
    return tokens.Claims(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4(),
                         time.time() + 60, tokens.ACCESS, read_only=read_only,
                         membership=uuid.uuid4())


def test_a_read_only_access_token_decodes_as_read_only_and_an_ordinary_one_does_not() -> None:
    assert tokens.decode(SECRET, tokens.encode(SECRET, _claims(True)), tokens.ACCESS).read_only
    plain = tokens.encode(SECRET, _claims(False))
    assert "ro" not in jwt.decode(plain, options={"verify_signature": False})
    assert not tokens.decode(SECRET, plain, tokens.ACCESS).read_only


@pytest.mark.parametrize("value", ["true", 1, None, [True]])
def test_a_read_only_claim_that_is_not_a_boolean_is_refused(value: object) -> None:
    payload = jwt.decode(tokens.encode(SECRET, _claims(True)), options={"verify_signature": False})
    forged = jwt.encode({**payload, "ro": value}, SECRET, algorithm="HS256")
    with pytest.raises(Unauthenticated):
        tokens.decode(SECRET, forged, tokens.ACCESS)


def test_a_read_only_access_token_is_not_a_refresh_token() -> None:
    with pytest.raises(Unauthenticated):
        tokens.decode(SECRET, tokens.encode(SECRET, _claims(True)), tokens.REFRESH)
