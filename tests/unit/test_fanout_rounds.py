"""`bench.fanout --rounds`: the feed's share of server CPU per change is the difference of two
windows, with and without streams; the summary a reader takes the figure from must pair each
followed window with its own round's alone one, and the wait between rounds must read the
server's count of open streams correctly."""

from __future__ import annotations

import pytest
from bench.fanout import parse_args
from bench.fanout_run import Phase, share_summary, streams_counted


def followed(rate: float, server_cores: float, alone_ms: float, writes: int = 500) -> Phase:
    """A 10-s window at `rate` with streams open, its round's alone cost per write beside it."""
    phase = Phase(f"{rate:g}/s", rate, 10.0, writes=writes, alone=alone_ms / 1e3)
    phase.cpu = {"server": server_cores}
    return phase


def test_a_reader_of_the_summary_gets_each_rounds_share_and_the_median_per_rate() -> None:
    phases = [followed(50, 0.06, 0.5), followed(200, 0.16, 0.1, writes=2000),
              followed(50, 0.08, 0.5), followed(200, 0.14, 0.1, writes=2000),
              followed(50, 0.05, 0.4), followed(200, 0.15, 0.1, writes=2000)]
    rows = share_summary(phases).splitlines()[2:]
    # 50/s: 0.06 x 10 / 500 = 1.2 ms per write, less 0.5 alone; then 1.1 and 0.6.
    assert rows[0] == "| 50/s | 0.70, 1.10, 0.60 | 0.70 |"
    assert rows[1] == "| 200/s | 0.70, 0.60, 0.65 | 0.65 |"


def test_windows_without_a_baseline_stay_out_of_the_summary() -> None:
    census = followed(50, 0.06, 0.5)
    census.census = {"kinds": {}}
    unpaired = Phase("50/s", 50, 10.0, writes=500)
    unpaired.cpu = {"server": 0.06}
    assert share_summary([census, unpaired]).splitlines()[2:] == []


def test_the_wait_between_rounds_sums_open_streams_over_every_worker_series() -> None:
    page = "\n".join([
        "# HELP authoric_sse_streams_open open subscribe streams",
        "# TYPE authoric_sse_streams_open gauge",
        "authoric_sse_streams_open 3.0",
        'authoric_sse_streams_open{pid="12"} 2.0',
        "authoric_sse_streams_opened_total 9.0",
    ])
    assert streams_counted(page) == 5.0
    assert streams_counted("authoric_sse_streams_open 0.0") == 0.0


def test_rounds_default_to_one_so_a_plain_run_is_unchanged() -> None:
    assert parse_args([]).rounds == 1
    assert parse_args(["--rounds", "3"]).rounds == 3


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--rounds", "2", "--multi-subscribers", "10"]])
def test_a_benchmark_asked_for_rounds_it_cannot_run_refuses_instead_of_measuring_less(
        argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
