"""Prometheus metrics (`GET /metrics`): what is counted, and how it is rendered.

Counted as things happen, in this process (cheap: an increment each):
- HTTP requests by route template, method and status, with their latency (one histogram),
  and requests in flight;
- database pool connections in use and callers waiting (pool checkout/checkin events);
- the request path's asyncpg pool: its size, connections in use and callers waiting, sampled
  once a second (`sample_request_pool`), so that counting costs a request nothing;
- open SSE streams, frames sent by type, streams closed by reason (`overflow`: dropped for a
  slow reader), counted by each stream's response (http/subscribe.py);
- the feed's latency (`authoric_feed_latency_seconds`), by stage: `delivered`, from the
  change's write (the change log's `created_at`: its transaction's start, so a long SQL
  transaction counts its own duration too) to the socket write, once per delivery; and,
  once per change this process fans out, `read` (written → read by the source, the
  sequencer's stamping included) and `judge` (read → judged for every read class);
- login throttle hits (429 on the token routes).

The feed's figures (frames by type, the latency stages) are counted in plain numbers
(`FeedTally`) and added to the prometheus metrics when they are published: at each scrape this
process answers, once a second (`sample_request_pool`), and when the process ends. A delivery
costs a few additions instead of a label lookup and three updates of the shared files, each
under a lock (docs/benchmarks-journal.md, "11. Delivery cost"); with several workers, another worker's
figures show at most a second late.

Read from the database when scraped (the same for every process, so any worker may answer):
sequencer lag (committed, unstamped changes), change-log rows (PostgreSQL's estimate, free to
read), the newest and the oldest position kept; and this process's relay lag.

With several workers (`authoric serve --workers N`), `authoric serve` points
PROMETHEUS_MULTIPROC_DIR at a fresh directory before the workers start: each worker writes
its values to files there, and whichever worker answers a scrape sums them (prometheus-client's
multiprocess mode), so counters do not jump between scrapes.
"""

from __future__ import annotations

import asyncio
import os
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from authoric.plan.runner import free_slots

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
# Finer, for the feed: benchmarks read p50/p99 out of these buckets (bench.fanout).
FEED_BUCKETS = (0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05,
                0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
FEED_STAGES = ("read", "judge", "delivered")
THROTTLED_ROUTES = ("/{app}/auth/token", "/{app}/auth/refresh")
# Frame kinds in an SSE chunk, by the bytes that start them (`change`: everything else).
FRAME_MARKS = {"connected": b"event: connected\n", "resync": b"event: resync\n",
               "reauth": b"event: reauth\n", "ping": b": ping\n"}

DB_FIGURES = """
SELECT (SELECT count(*) FROM authoric.changes WHERE pos IS NULL) AS unstamped,
       (SELECT greatest(reltuples, 0)::bigint FROM pg_class
         WHERE oid = 'authoric.changes'::regclass) AS rows_estimate,
       (SELECT max(pos) FROM authoric.changes) AS head,
       (SELECT min(pos) FROM authoric.changes) AS oldest
"""


class FeedTally:
    """The feed's counts since they were last taken, in plain numbers: frames sent by kind, and
    per latency stage the observations by bucket (`bounds`: the histogram's, +Inf last; an
    observation counts in the first bound it does not exceed) and their sum."""

    __slots__ = ("bounds", "buckets", "frames", "seconds")

    def __init__(self, bounds: Iterable[float]) -> None:
        self.bounds = [*bounds, float("inf")]
        self.frames: dict[str, int] = {}
        self.buckets: dict[str, list[int]] = {}
        self.seconds: dict[str, float] = {}

    def count_frames(self, chunk: bytes, streams: int = 1) -> None:
        """The frames of one SSE chunk, by kind (FRAME_MARKS; `change`: every other), sent to
        `streams` streams."""
        total = chunk.count(b"\n\n")
        frames = self.frames
        if total == 1 and chunk.startswith(b"id:"):  # one change (no mark starts so)
            frames["change"] = frames.get("change", 0) + streams
            return
        for kind, mark in FRAME_MARKS.items():
            n = chunk.count(mark) if total > 1 else int(chunk.startswith(mark))
            if n:
                frames[kind] = frames.get(kind, 0) + n * streams
                total -= n
        if total > 0:
            frames["change"] = frames.get("change", 0) + total * streams

    def observe(self, stage: str, seconds: float, times: int = 1) -> None:
        """A latency of `stage` (at least 0), observed `times` times."""
        seconds = max(0.0, seconds)
        buckets = self.buckets.get(stage)
        if buckets is None:
            buckets = self.buckets[stage] = [0] * len(self.bounds)
        buckets[bisect_left(self.bounds, seconds)] += times
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds * times

    def delivered(self, written: Iterable[float], now: float, streams: int = 1) -> None:
        """A `delivered` latency per live frame written at `now` to each of `streams` streams:
        `now - at`, at least 0."""
        for at in written:
            self.observe("delivered", now - at, streams)

    def take(self) -> tuple[dict[str, int], dict[str, list[int]], dict[str, float]]:
        """What was counted since the last call, leaving every count at zero."""
        taken = (self.frames, self.buckets, self.seconds)
        self.frames, self.buckets, self.seconds = {}, {}, {}
        return taken


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class Metrics:
    """This process's metric objects, registered in their own registry (nothing global)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry

        def live(name: str, documentation: str, *labels: str) -> Gauge:
            # A gauge every worker process adds to: the deployment's total, not one process's.
            return Gauge(name, documentation, labels, multiprocess_mode="livesum", registry=r)

        def counter(name: str, documentation: str, *labels: str) -> Counter:
            return Counter(name, documentation, labels, registry=r)

        self.requests = Histogram(
            "authoric_http_request_duration_seconds",
            "HTTP requests by route template, method and status, and how long they took",
            ["route", "method", "status"], buckets=LATENCY_BUCKETS, registry=r)
        self.in_flight = live("authoric_http_requests_in_flight",
                              "requests begun and not yet answered in full")
        # Two pools: the SQLAlchemy engine's (admin and console routes, transactions) and the
        # asyncpg pool that serves table requests. Each gauge's help says which it watches.
        self.pool_in_use = live(
            "authoric_db_pool_in_use",
            "connections checked out of the SQLAlchemy engine's pool (admin and console routes, "
            "transactions; table requests use the request pool: authoric_db_request_pool_*)")
        self.pool_waiting = live(
            "authoric_db_pool_waiting",
            "callers waiting for a connection of the SQLAlchemy engine's pool")
        self.request_pool_size = live(
            "authoric_db_request_pool_size",
            "connections open in the asyncpg pool that serves table requests")
        self.request_pool_in_use = live(
            "authoric_db_request_pool_in_use",
            "request path's pooled connections running a statement (sampled each second)")
        self.request_pool_waiting = live(
            "authoric_db_request_pool_waiting",
            "requests waiting for a connection of the request path's pool (sampled each second)")
        self.streams_open = live("authoric_sse_streams_open", "open subscribe streams")
        self.frames = counter("authoric_sse_frames_sent", "SSE frames sent, by type", "type")
        self.streams_closed = counter(
            "authoric_sse_streams_closed_by_server",
            "streams the server ended, by reason (overflow: the reader was too slow)", "reason")
        self.stream_handoffs = counter(
            "authoric_sse_stream_handoffs",
            "subscribe requests due to another worker's slot (serving/handoff.py), by outcome "
            "(sent: handed to it; kept: served here, that worker could not take it)", "outcome")
        self.feed_latency = Histogram(
            "authoric_feed_latency_seconds",
            "live feed: from a change's write to its socket write, per delivery (delivered); "
            "to its read by the source and to its judging, per change (read, judge)",
            ["stage"], buckets=FEED_BUCKETS, registry=r)
        self._stages = {stage: self.feed_latency.labels(stage) for stage in FEED_STAGES}
        # Frames and feed latencies, counted in plain numbers; `publish` adds them to `frames`
        # and `feed_latency`.
        self.feed = FeedTally(FEED_BUCKETS)
        self.throttled = counter("authoric_login_throttled",
                                 "token and refresh requests refused with 429")
        self.api_key_writes = counter(
            "authoric_api_key_last_used_writes",
            "lastUsedAt writes started, at most one a minute per API key and process")
        # Labelled children of the per-request and per-delivery series, by metric and labels:
        # `labels()` costs a few microseconds, on every request and every delivery.
        self._children: dict[tuple[Any, ...], Any] = {}
        # Webhooks (webhooks/worker.py), by webhook uid. Only the process holding a webhook's
        # lease sets its lag; a process that lets one go sets it to 0, so the sum is its lag.
        self.webhook_deliveries = counter(
            "authoric_webhook_deliveries", "webhook delivery attempts that got a 2xx", "webhook")
        self.webhook_failures = counter(
            "authoric_webhook_failures",
            "webhook delivery attempts that failed (no 2xx within 10 s, or refused)", "webhook")
        self.webhook_lag_positions = live(
            "authoric_webhook_lag_positions", "change-log positions between a webhook's "
            "cursor and the head, while it has changes waiting", "webhook")
        self.webhook_lag_seconds = live(
            "authoric_webhook_lag_seconds",
            "age of a webhook's oldest change not yet delivered (0: none waiting)", "webhook")
        self.webhook_delivering = live(
            "authoric_webhook_delivering", "processes delivering the webhook now (holding its "
            "lease): 1, or 0 once its holder let it go (paused, failing, deleted, lost)",
            "webhook")
        self.webhook_judged = counter(
            "authoric_webhook_judged_changes", "changes judged for a role's webhook, by whose "
            "re-read: `shared` (a stream or webhook of the same read class had just been judged "
            "for them, and its verdicts were reused) or `own`", "webhook", "by")

    # --- counted as things happen ---------------------------------------------------------

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        self._child(self.requests, route, method, str(status)).observe(seconds)
        if status == 429 and route in THROTTLED_ROUTES:
            self.throttled.inc()

    def watch_pool(self, engine: AsyncEngine) -> None:
        pool = engine.sync_engine.pool

        def waiting() -> int:
            # asyncio.Queue's waiting getters, inside SQLAlchemy's async queue; 0 if that
            # private layout ever changes (the gauge then reads 0, nothing breaks).
            queue = getattr(getattr(pool, "_pool", None), "_queue", None)
            return len(getattr(queue, "_getters", ()) or ())

        def checked_out(*_: Any) -> None:
            self.pool_in_use.inc()
            self.pool_waiting.set(waiting())

        def checked_in(*_: Any) -> None:
            self.pool_in_use.dec()
            self.pool_waiting.set(waiting())

        event.listen(pool, "checkout", checked_out)
        event.listen(pool, "checkin", checked_in)

    async def sample_request_pool(self, pool: asyncpg.Pool, every: float = 1.0) -> None:
        """Set the request pool's gauges and publish the feed's figures every `every` seconds,
        until cancelled."""
        while True:
            self.sample_pool_once(pool)
            self.publish()
            await asyncio.sleep(every)

    def sample_pool_once(self, pool: asyncpg.Pool) -> None:
        size = pool.get_size()
        self.request_pool_size.set(size)
        self.request_pool_in_use.set(size - pool.get_idle_size())
        # The free slots' waiting getters; 0 if that private layout ever changes (the gauge
        # then reads 0, nothing breaks).
        queue = free_slots(pool)
        self.request_pool_waiting.set(len(getattr(queue, "_getters", ()) or ()))

    def webhook_delivered(self, webhook: str, ok: bool) -> None:
        self._child(self.webhook_deliveries if ok else self.webhook_failures, webhook).inc()

    def _child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, kept (webhooks come and go: past 8,192 kept children
        the cache starts again; the metric itself keeps every series)."""
        key = (metric, *labels)
        child = self._children.get(key)
        if child is None:
            if len(self._children) >= 8192:
                self._children.clear()
            child = self._children[key] = metric.labels(*labels)
        return child

    def webhook_judging(self, webhook: str, shared: int, own: int) -> None:
        if shared:
            self._child(self.webhook_judged, webhook, "shared").inc(shared)
        if own:
            self._child(self.webhook_judged, webhook, "own").inc(own)

    def webhook_lag(self, webhook: str, positions: int, seconds: float) -> None:
        self.webhook_lag_positions.labels(webhook).set(positions)
        self.webhook_lag_seconds.labels(webhook).set(seconds)

    def webhook_running(self, webhook: str, delivering: bool) -> None:
        self.webhook_delivering.labels(webhook).set(1 if delivering else 0)

    def feed_stage(self, stage: str, seconds: float) -> None:
        self.feed.observe(stage, seconds)

    def publish(self) -> None:
        """Add the feed's figures counted since the last call to the prometheus metrics."""
        frames, buckets, seconds = self.feed.take()
        for kind, n in frames.items():
            self.frames.labels(kind).inc(n)
        for stage, counts in buckets.items():
            # The histogram child's own values, which its `observe` adds to: the sum, and one
            # value per bucket (prometheus-client keeps them per bucket, not cumulative).
            child = self._stages[stage]
            child._sum.inc(seconds[stage])
            for value, n in zip(child._buckets, counts, strict=True):
                if n:
                    value.inc(n)

    def process_ended(self) -> None:
        """Drop this process's live gauges (open streams, pool) from the shared files."""
        self.publish()  # counters outlive the process in the shared files
        if multiprocess_dir():
            mark_process_dead(os.getpid())

    # --- rendering ------------------------------------------------------------------------

    def render(self, db: dict[str, Any], relay_position: int) -> bytes:
        """The exposition text: counted metrics (all workers') + the scrape-time figures."""
        self.publish()
        path = multiprocess_dir()
        if path:
            counted = CollectorRegistry(auto_describe=True)
            MultiProcessCollector(counted, path)
        else:
            counted = self.registry
        scraped = CollectorRegistry(auto_describe=True)
        scraped.register(_Figures(db, relay_position))
        return generate_latest(counted) + generate_latest(scraped)


class _Figures(Collector):
    """Gauges read from the database at scrape time."""

    def __init__(self, db: dict[str, Any], relay_position: int) -> None:
        self.db, self.relay_position = db, relay_position

    def collect(self) -> Iterable[GaugeMetricFamily]:
        head = int(self.db["head"] or 0)
        yield GaugeMetricFamily("authoric_sequencer_lag_changes",
                                "committed change-log rows not yet given a position",
                                value=int(self.db["unstamped"] or 0))
        yield GaugeMetricFamily("authoric_relay_lag_positions",
                                "positions stamped but not yet handed to this process's streams",
                                value=max(0, head - self.relay_position) if self.relay_position >= 0
                                else head)
        yield GaugeMetricFamily("authoric_change_log_rows",
                                "change-log rows kept (PostgreSQL's estimate)",
                                value=int(self.db["rows_estimate"] or 0))
        yield GaugeMetricFamily("authoric_change_log_head_position", "the newest position",
                                value=head)
        yield GaugeMetricFamily("authoric_change_log_oldest_position",
                                "the oldest position still kept (0: none)",
                                value=int(self.db["oldest"] or 0))

