"""The feed's figures (observability/metrics.py, `FeedTally`): counted in plain numbers as
frames go out and changes are fanned out, they must read, in a scrape, exactly as if each frame
had been counted and each latency observed in the prometheus metrics one by one."""

from __future__ import annotations

from authoric.observability.metrics import FEED_BUCKETS, Metrics

FIGURES = {"unstamped": 0, "rows_estimate": 0, "head": 0, "oldest": 0}
CHUNKS = [
    b"event: connected\ndata: {}\n\n",
    b": ping\n\n",
    b"id: 1\ndata: {}\n\n",
    b"id: 2\ndata: {}\n\nid: 3\ndata: {}\n\nevent: resync\nid: 3\ndata: {}\n\n",
    b"event: reauth\ndata: {}\n\n",
]
# Latencies at, between and past the bounds, and one below zero (a clock step): read as 0.
LATENCIES = [-0.5, 0.0, *FEED_BUCKETS, 0.0042, 0.9, 29.0, 31.0, 3600.0]


def feed_lines(metrics: Metrics) -> list[str]:
    """The scrape's lines for frames sent and the feed's latency (no `_created` times)."""
    text = metrics.render(FIGURES, 0).decode()
    return [line for line in text.splitlines()
            if line.startswith(("authoric_sse_frames_sent_total", "authoric_feed_latency_seconds_"))
            and "_created" not in line]


def test_an_operator_scraping_sees_each_frame_and_each_feed_latency_counted_once() -> None:
    counted, observed = Metrics(), Metrics()
    for chunk in CHUNKS:
        counted.feed.count_frames(chunk)
    for seconds in LATENCIES:
        counted.feed.delivered([0.0], seconds)
        counted.feed_stage("read", seconds / 2)
    counted.feed_stage("judge", 0.004)
    # The same, one prometheus update per frame and per observation.
    for kind, n in (("connected", 1), ("ping", 1), ("change", 3), ("resync", 1), ("reauth", 1)):
        observed.frames.labels(kind).inc(n)
    for seconds in LATENCIES:
        observed.feed_latency.labels("delivered").observe(max(0.0, seconds))
        observed.feed_latency.labels("read").observe(max(0.0, seconds / 2))
    observed.feed_latency.labels("judge").observe(0.004)
    expected = feed_lines(observed)
    assert 'authoric_sse_frames_sent_total{type="change"} 3.0' in expected
    assert f'authoric_feed_latency_seconds_count{{stage="delivered"}} {len(LATENCIES)}.0' \
        in expected
    assert feed_lines(counted) == expected
    # Counted once: a second scrape adds nothing.
    assert feed_lines(counted) == expected


def webhook_lines(metrics: Metrics) -> list[str]:
    text = metrics.render(FIGURES, 0).decode()
    return sorted(line for line in text.splitlines()
                  if line.startswith(("authoric_webhook_deliveries_total",
                                      "authoric_webhook_failures_total",
                                      "authoric_webhook_judged_changes_total")))


def test_an_operator_scraping_sees_every_delivery_and_judged_change_of_each_webhook() -> None:
    metrics = Metrics()
    for _ in range(3):
        metrics.webhook_delivered("w1", True)
    metrics.webhook_delivered("w1", False)
    metrics.webhook_delivered("w2", True)
    metrics.webhook_judging("w1", shared=5, own=2)
    metrics.webhook_judging("w1", shared=1, own=0)
    assert webhook_lines(metrics) == sorted([
        'authoric_webhook_deliveries_total{webhook="w1"} 3.0',
        'authoric_webhook_deliveries_total{webhook="w2"} 1.0',
        'authoric_webhook_failures_total{webhook="w1"} 1.0',
        'authoric_webhook_judged_changes_total{by="shared",webhook="w1"} 6.0',
        'authoric_webhook_judged_changes_total{by="own",webhook="w1"} 2.0',
    ])
