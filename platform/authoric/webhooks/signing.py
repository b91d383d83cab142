"""Standard Webhooks signatures (standardwebhooks.com), made by the `standardwebhooks` package.

`webhook-id` is the change's position, so every retry of a delivery carries the same id and a
receiver drops duplicates by it. Secrets are `whsec_` + base64 of 24 random bytes.
"""

from __future__ import annotations

import base64
import functools
import secrets
from datetime import UTC, datetime

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def signed_headers(secret: str, msg_id: str, body: bytes, at: float) -> dict[str, str]:
    """The headers of one delivery attempt (`msg_id`: the position); `at` (epoch seconds,
    the wall clock: receivers refuse a timestamp more than 5 minutes off theirs) is the
    attempt's time."""
    when = datetime.fromtimestamp(int(at), UTC)
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at)),
        "webhook-signature": _signer(secret).sign(msg_id, when, body),
    }


@functools.lru_cache(maxsize=1024)
def _signer(secret: str) -> Webhook:
    """The signer of a secret, its key decoded once (not on every delivery)."""
    return Webhook(secret)
