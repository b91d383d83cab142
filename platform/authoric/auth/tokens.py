"""Signed tokens (PyJWT, HS256 only): access tokens bound to app, user and org, and refresh tokens.

Decoding is strict: the algorithm list is pinned, `alg: none` and any `kid` are refused, every
claim must be present with its type, and the token type must match where it is used.
Verified access tokens are kept until their `exp` (`VerifiedTokens`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import jwt

from authoric import clock
from authoric.errors import TokenExpired, Unauthenticated

ALGORITHM = "HS256"
ISSUER = "authoric"
ACCESS, REFRESH = "access", "refresh"
_REQUIRED = ["exp", "iat", "iss", "aud", "sub", "org", "typ", "jti"]


@dataclass(frozen=True)
class Claims:
    app_uid: uuid.UUID
    user_uid: uuid.UUID
    org_uid: uuid.UUID | None  # None: an account token (a user signed in to no org)
    jti: uuid.UUID
    expires_at: float
    token_type: str
    read_only: bool = False  # an impersonation ("view as") token: reads only, never refreshed
    # The membership an access token was issued for (`mid`): removing the member ends it, and
    # a membership given back later is a new one that old tokens do not reach.
    membership: uuid.UUID | None = None
    # The session (refresh-token family) the token belongs to (`sid`): `GET /auth/sessions`
    # marks it current, and an account token's session must still be live.
    session: uuid.UUID | None = None
    # An API key's (auth/api_keys.py): user and membership are the key's uid; never encoded.
    api_key: bool = False


def encode(secret: str, claims: Claims) -> str:
    now = int(clock.now())
    payload = {
        "iss": ISSUER, "aud": f"app:{claims.app_uid}", "sub": str(claims.user_uid),
        "org": "" if claims.org_uid is None else str(claims.org_uid),
        "typ": claims.token_type, "jti": str(claims.jti),
        "iat": now, "exp": int(claims.expires_at),
    }
    if claims.read_only:
        payload["ro"] = True
    if claims.membership is not None:
        payload["mid"] = str(claims.membership)
    if claims.session is not None:
        payload["sid"] = str(claims.session)
    return jwt.encode(payload, secret, algorithm=ALGORITHM)


def decode(secret: str, token: str, token_type: str) -> Claims:
    """The claims of a valid token of `token_type`; 401 for anything else."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise Unauthenticated("malformed token") from exc
    if header.get("alg") != ALGORITHM or set(header) - {"alg", "typ"}:
        raise Unauthenticated("token header not accepted")
    try:
        payload = jwt.decode(
            token, secret, algorithms=[ALGORITHM], issuer=ISSUER,
            # Times are judged below against `clock.now()`, which tests can move.
            options={"require": _REQUIRED, "verify_aud": False, "verify_exp": False,
                     "verify_iat": False},
        )
    except jwt.PyJWTError as exc:
        raise Unauthenticated("invalid token") from exc
    claims = _claims(payload, token_type)
    now = clock.now()
    if payload["iat"] > now + 60:  # minted in the future: not by a server sharing our clock
        raise Unauthenticated("token issued in the future")
    if claims.expires_at <= now:
        raise TokenExpired("the access token has expired")
    return claims


def _claims(payload: dict[str, Any], token_type: str) -> Claims:
    if payload.get("typ") != token_type:
        raise Unauthenticated(f"not an {token_type} token")
    aud = payload.get("aud")
    try:
        if not isinstance(aud, str) or not aud.startswith("app:"):
            raise ValueError(aud)
        if not all(isinstance(payload[k], str) for k in ("sub", "org", "jti")):
            raise ValueError("claims")
        # NumericDate claims are JSON numbers; PyJWT alone would take `"exp": "9999999999"`.
        if not all(type(payload[k]) in (int, float) for k in ("exp", "iat")):
            raise ValueError("dates")
        if type(payload.get("ro", False)) is not bool:
            raise ValueError("ro")
        # An org's access token names its membership; one without (issued before memberships
        # had ids) is refused, and its client refreshes. An account token (`org` empty) has
        # no membership, and must name its session.
        org = uuid.UUID(payload["org"]) if payload["org"] else None
        membership = (uuid.UUID(payload["mid"]) if token_type == ACCESS and org is not None
                      else None)
        session = uuid.UUID(payload["sid"]) if "sid" in payload else None
        if token_type == ACCESS and org is None and (session is None or payload.get("ro")):
            raise ValueError("an account token names its session")
        return Claims(uuid.UUID(aud[4:]), uuid.UUID(payload["sub"]), org,
                      uuid.UUID(payload["jti"]), float(payload["exp"]), token_type,
                      payload.get("ro", False), membership, session)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise Unauthenticated("token claims are malformed") from exc


class VerifiedTokens:
    """Access tokens already verified, reused until their `exp` (bounded; oldest go first).

    Verifying an HS256 token costs more than the rest of a cached request; a token's claims
    cannot change, so the claims are kept keyed by the token string. Expiry is still checked
    on every use. Revocation does not live in access tokens (roles and memberships are read
    by every request's statement), so nothing else can invalidate an entry.
    """

    def __init__(self, secret: str, size: int = 10_000) -> None:
        self.secret, self.size = secret, size
        self._claims: dict[str, Claims] = {}

    def access(self, token: str, now: float | None = None) -> Claims:
        claims = self._claims.get(token)
        if claims is None:
            claims = decode(self.secret, token, ACCESS)
            if len(self._claims) >= self.size:
                self._claims.pop(next(iter(self._claims)))
            self._claims[token] = claims
        if claims.expires_at <= (clock.now() if now is None else now):
            self._claims.pop(token, None)
            raise TokenExpired("the access token has expired")
        return claims
