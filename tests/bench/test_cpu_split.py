"""bench.cpu_split's arithmetic, in process: what a benchmark reader is told each PostgreSQL
backend cost."""

from __future__ import annotations

import pytest
from bench.cpu_split import split


def test_the_reader_sees_each_backends_cpu_under_its_name_with_same_named_backends_summed(
) -> None:
    before = {10: 1.0, 11: 2.0, 12: 0.5, 13: 4.0}
    after = {10: 1.5, 11: 2.25, 12: 0.75, 13: 4.0, 14: 0.125}  # 14 connected meanwhile
    names = {10: "authoric", 11: "authoric", 12: "authoric-sequencer", 14: "authoric-relay"}
    assert split(before, after, names) == pytest.approx({
        "authoric": 0.75, "authoric-sequencer": 0.25, "authoric-relay": 0.125,
        "postmaster and others": 0.0})
