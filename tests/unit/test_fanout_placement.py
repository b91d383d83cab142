"""How `bench.fanout` spreads its subscribers over read classes: the figures it prints are
only meaningful if every class it claims exists, and with `--hot-orgs` the deliveries per
change grow without the classes changing."""

from __future__ import annotations

from collections import Counter

import pytest
from bench.fanout import parse_args
from bench.fanout_run import placement

ORGS, ROLES = 50, 3


def test_without_hot_orgs_a_benchmark_spreads_subscribers_evenly_over_every_class() -> None:
    per_class = Counter(placement(n, ORGS, ROLES)[:2] for n in range(1000))
    assert len(per_class) == ORGS * ROLES
    assert set(per_class.values()) == {6, 7}  # 1000 / 150, round-robin


def test_with_hot_orgs_every_class_still_has_a_subscriber_and_the_rest_follow_the_written_orgs() -> None:
    per_class = Counter(placement(n, ORGS, ROLES, hot=3)[:2] for n in range(1000))
    assert len(per_class) == ORGS * ROLES  # 150 read classes, as without
    cold = {k: v for k, v in per_class.items() if k[0] >= 3}
    hot = {k: v for k, v in per_class.items() if k[0] < 3}
    assert set(cold.values()) == {1}
    assert sum(hot.values()) == 1000 - len(cold)
    assert max(hot.values()) - min(hot.values()) <= 1  # the written orgs' 9 classes alike


def test_subscribers_of_one_class_take_its_tokens_in_turn_with_hot_orgs() -> None:
    rounds = [r for n in range(1000) for (org, role, r) in [placement(n, ORGS, ROLES, hot=3)]
              if (org, role) == (0, 0)]
    assert rounds == list(range(len(rounds)))  # 0, 1, 2, ...: tokens and tables alternate


def test_an_operator_asking_for_more_hot_orgs_than_orgs_is_refused() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--orgs", "4", "--hot-orgs", "5"])
