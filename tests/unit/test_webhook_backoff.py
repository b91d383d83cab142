"""Webhook retries: full-jitter exponential backoff, never sooner than 5 s, its bound doubling,
at most 1 h apart;
and the Standard Webhooks signature, checked with the `standardwebhooks` package."""

from __future__ import annotations

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from authoric.webhooks.backoff import ceiling, retry_delay
from authoric.webhooks.signing import new_secret, signed_headers


def test_the_ceiling_doubles_from_10_s_and_stops_at_an_hour() -> None:
    assert [ceiling(n) for n in range(1, 6)] == [10, 20, 40, 80, 160]
    assert ceiling(10) == 3600 and ceiling(10_000) == 3600


def test_a_receiver_is_never_retried_sooner_than_5_s_after_a_failure() -> None:
    assert [retry_delay(n, lambda: 0.0) for n in (1, 2, 30)] == [5.0, 5.0, 5.0]


def test_each_wait_is_uniform_between_5_s_and_the_ceiling() -> None:
    assert retry_delay(1, lambda: 0.5) == 7.5
    assert retry_delay(3, lambda: 0.5) == 22.5
    assert retry_delay(30, lambda: 0.999) == pytest.approx(5 + 0.999 * 3595)


def test_a_delivery_signed_here_verifies_with_the_standardwebhooks_package() -> None:
    import time

    secret = new_secret()
    body = b'{"type":"insert","position":"42"}'
    headers = signed_headers(secret, "42", body, time.time())
    assert headers["webhook-id"] == "42"
    assert Webhook(secret).verify(body, headers) == {"type": "insert", "position": "42"}
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body + b" ", headers)
