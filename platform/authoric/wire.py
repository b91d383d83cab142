"""JSON as the platform writes it on the wire, for REST bodies and feed frames alike."""

from __future__ import annotations

import json
from typing import Any

import orjson


def json_bytes(body: Any) -> bytes:
    """`body` as compact JSON (UTF-8), encoded by orjson: several times faster than the
    standard encoder, which matters for each list page and each feed frame. A json column may
    hold what orjson refuses (an integer past 64 bits): the standard encoder writes every
    value `json.loads` accepted."""
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
