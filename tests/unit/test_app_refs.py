"""What a URL's `{app}` can name (catalog.names.app_key), in process: a uid, a name an app could
have, or nothing at all, decided before any statement is sent."""

from __future__ import annotations

import uuid

import pytest

from authoric.catalog.names import app_key


def test_a_uid_in_the_url_names_the_app_by_uid() -> None:
    uid = uuid.uuid4()
    assert app_key(str(uid)) == uid


def test_a_legal_name_in_the_url_names_the_app_by_name() -> None:
    assert app_key("shop_2") == "shop_2"


@pytest.mark.parametrize("ref", ["ab\x00", "Upper", "caf\u00e9", "x" * 64, "", "a b", "1abc"])
def test_a_reference_no_app_can_have_names_nothing(ref: str) -> None:
    assert app_key(ref) is None
