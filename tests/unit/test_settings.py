"""Server settings (authoric.settings), in process: values that would break the server are
refused when it starts, with the setting's name, instead of failing later."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from authoric.settings import Settings


@pytest.mark.parametrize("value", ["0", "-1"])
def test_an_operator_who_sets_no_positive_sse_ping_interval_is_refused_at_start(
        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("AUTHORIC_SSE_PING_INTERVAL", value)
    with pytest.raises(ValidationError, match="AUTHORIC_SSE_PING_INTERVAL"):
        Settings()


def test_an_operator_who_sets_a_short_sse_ping_interval_gets_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTHORIC_SSE_PING_INTERVAL", "0.5")
    assert Settings().sse_ping_interval == 0.5
