"""Server settings (authoric.settings), in process: values that would break the server are
refused when it starts, with the setting's name, instead of failing later."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from authoric.settings import Settings


@pytest.mark.parametrize(("variable", "value"), [
    ("AUTHORIC_SSE_PING_INTERVAL", "0"), ("AUTHORIC_SSE_PING_INTERVAL", "-1"),
    # the feed's gathering: 1 to 1,000 ms
    ("AUTHORIC_FEED_GATHER_MS", "0"), ("AUTHORIC_FEED_GATHER_MS", "-5"),
    ("AUTHORIC_FEED_GATHER_MS", "1001"), ("AUTHORIC_FEED_GATHER_MS", "soon"),
    ("AUTHORIC_FEED_GATHER_MS", "nan"),  # compares false to both bounds, yet is refused
])
def test_an_operator_who_sets_a_value_the_server_cannot_use_is_refused_at_start_by_its_name(
        monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError, match=variable):
        Settings()


def test_an_operator_who_sets_a_short_sse_ping_interval_gets_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTHORIC_SSE_PING_INTERVAL", "0.5")
    assert Settings().sse_ping_interval == 0.5


def test_an_operator_finds_every_settings_variable_in_the_configuration_docs() -> None:
    documented = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    variables = [str(field.validation_alias) for field in Settings.model_fields.values()]
    assert "AUTHORIC_SSE_PING_INTERVAL" in variables and "DATABASE_URL" in variables
    assert [name for name in variables if f"`{name}`" not in documented] == []


def test_an_operator_sets_a_knob_by_its_field_name_in_capitals(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTHORIC_DB_POOL_SIZE", "3")
    monkeypatch.setenv("AUTHORIC_LOGIN_ACCOUNT_LIMIT", "4")
    settings = Settings()
    assert (settings.db_pool_size, settings.account_rate_limit) == (3, 4)


def test_an_operator_who_sets_a_feed_gather_gets_it_and_one_who_does_not_gets_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTHORIC_FEED_GATHER_MS", raising=False)  # whatever the shell had set
    assert Settings().feed_gather_ms is None
    monkeypatch.setenv("AUTHORIC_FEED_GATHER_MS", "50")
    assert Settings().feed_gather_ms == 50
