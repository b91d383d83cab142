"""The application factory: everything is built in `create_app`/the lifespan, nothing at import."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from authoric import clock
from authoric.auth import passwords
from authoric.auth.ratelimit import RateLimiter
from authoric.auth.secrets import admin_token, jwt_secret
from authoric.catalog.snapshot import SnapshotCache
from authoric.changes.outbox import OutboxSource
from authoric.changes.sequencer import Sequencer
from authoric.db.embedded import embedded_database_url
from authoric.db.engine import create_engine, libpq_url, session_settings
from authoric.http import (
    account_pages,
    accounts,
    admin,
    admin_accounts,
    autocrud,
    console,
    console_static,
    health,
    metrics,
    openapi,
    org,
    sessions,
    subscribe,
    webhooks,
)
from authoric.http.admin_audit import AdminAudit
from authoric.http.context import Services
from authoric.http.cors import AppCors, app_origins
from authoric.http.errors import install_error_handlers
from authoric.http.front import Front, Platform
from authoric.http.limits import BodyLimit, RoundTripHeader, UrlLimit
from authoric.http.observe import Observe
from authoric.http.table_route import TableRoutes
from authoric.mail.sender import start_mail_sender
from authoric.observability.metrics import Metrics
from authoric.plan.runner import open_pool
from authoric.realtime.hub import Hub
from authoric.realtime.stream_leases import StreamLeases
from authoric.realtime.verdicts import Verdicts
from authoric.serving.handoff import start_handoff
from authoric.settings import Settings
from authoric.webhooks.worker import WORKER_CONNECTIONS, Deliverer, Tee

# Net allocations of tracked objects between two young collections (CPython's default: 700).
# A request frees nearly everything it allocates by reference counting, but at 50 connections
# the requests in flight hold more than 700 objects between them, so the default ran a young
# collection every ~9 creates, each walking the in-flight requests' objects and promoting them
# to older generations, which then filled and were collected in turn: 3-5% of a worker's CPU,
# and full collections of 8-40 ms of CPU each (bench.peers, docs/benchmarks.md "Sixth
# session"). At this threshold a steady request load triggers no collection at all;
# cyclic garbage (an exception and its traceback) waits for the next one, at most this many
# objects later.
YOUNG_COLLECTION_THRESHOLD = 50_000


# Every router, in the order routes are matched, one pattern after another. Streams precede
# the table routes (`.../subscribe` is not a row uid).
ROUTERS = (subscribe.router, autocrud.router, health.router, metrics.router, admin.router,
           console.router, console_static.router, openapi.router, sessions.router,
           accounts.router, account_pages.router, admin_accounts.router, org.router,
           webhooks.router)


def settle_collector() -> None:
    """Once per process, after startup: long-lived objects built so far need no more collector
    passes (`gc.freeze`: with thousands of open streams, full collections otherwise take a
    large share of the loop), and young collections wait for `YOUNG_COLLECTION_THRESHOLD`."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    counted = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        clock.install(settings.test_clock_file)
        passwords.install(settings.test_cheap_password_hashing)
        url = settings.database_url or embedded_database_url(settings.data_dir)
        engine = create_engine(settings, url)
        counted.watch_pool(engine)
        app.state.head_revision = health.head_revision()
        snapshots = SnapshotCache()
        hub = Hub(engine, snapshots)
        hub.observe_stage = counted.feed_stage
        # A relay batch never exceeds half a subscriber queue, so a backlog alone does not
        # overflow a subscriber that reads at full speed.
        source = OutboxSource(engine, libpq_url(url),
                              batch=max(1, min(2000, settings.sse_queue_size // 2)))
        sequencer = Sequencer(settings, libpq_url(url))
        pool = await open_pool(libpq_url(url), settings.db_pool_size, session_settings(settings))
        hub.pool = pool  # the judge runs on the request path's pool (realtime/hub.py)
        mail_sender = start_mail_sender(settings, engine)
        app.state.services = Services(
            settings=settings, engine=engine, jwt_secret=jwt_secret(settings),
            admin_token=admin_token(settings), snapshots=snapshots,
            token_limiter=RateLimiter(settings), hub=hub, sequencer=sequencer,
            pool=pool, source=source, mail_sender=mail_sender, metrics=counted,
        )
        app.state.source = source
        app.state.stream_leases = StreamLeases(engine, settings)
        settle_collector()
        deliverer = app.state.webhooks = Deliverer(settings, engine, source, snapshots, counted)
        # The delivery worker's connections: a few of its own, so a hundred webhooks woken by
        # one batch queue among themselves, not ahead of the requests on the request pool.
        webhook_pool = (await open_pool(libpq_url(url), WORKER_CONNECTIONS,
                                        session_settings(settings))
                        if settings.webhook_delivery else None)
        deliverer.pool = webhook_pool
        # Webhooks judged as a read class that a stream here has just judged reuse its verdicts.
        hub.verdicts = deliverer.verdicts = Verdicts()
        sequencer.start()
        source.start(Tee(hub, deliverer))
        if settings.webhook_delivery:
            deliverer.start()
        app.state.services.indexes.start_sweep()
        sampler = asyncio.create_task(counted.sample_request_pool(pool))
        handoff = app.state.handoff = start_handoff(settings, app, counted)
        try:
            yield
        finally:
            sampler.cancel()
            if mail_sender is not None:
                await mail_sender.stop()
            if handoff is not None:
                handoff.stop()
            await app.state.stream_leases.stop()
            await app.state.services.indexes.stop()
            # By now uvicorn has stopped accepting, streams have ended (sse-starlette sees the
            # shutdown) and in-flight requests have finished or the grace period is over.
            await deliverer.stop()
            if webhook_pool is not None:
                await webhook_pool.close()
            await source.stop()
            await hub.close()
            await sequencer.stop()
            await pool.close()
            await engine.dispose()
            counted.process_ended()

    # FastAPI's own OpenTelemetry hooks are off: Authoric has its metrics and logs
    # (observability/), and asking OpenTelemetry for providers read the environment on every
    # request.
    app = Platform(title="Authoric platform API", version="0.1.0", lifespan=lifespan,
                   docs_url="/docs", redoc_url=None,
                   telemetry={"tracing": False, "metrics": False, "logs": False,
                              "operation_spans": False})
    app.state.metrics = counted
    install_error_handlers(app)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes,
                       import_limit=settings.max_import_bytes)
    app.add_middleware(UrlLimit)
    app.add_middleware(RoundTripHeader)
    app.add_middleware(AdminAudit)
    app.add_middleware(Observe, metrics=counted)
    app.add_middleware(AppCors, origins_of=app_origins)  # outermost: 413s get CORS headers too
    for router in ROUTERS:
        app.include_router(router)
    # Ahead of the whole stack, table requests by one path split (http/table_route.py), served
    # by one layer that does what the middlewares above do for them (http/front.py); the
    # autocrud router still declares them, documents them and serves what the split leaves.
    app.front = Front(TableRoutes(autocrud.router, ROUTERS), counted, app_origins,
                      settings.max_body_bytes)
    return app


def app_from_env() -> FastAPI:
    """Factory for `uvicorn --factory` (used by `authoric serve --workers N`)."""
    return create_app(Settings())


def platform_document() -> dict[str, Any]:
    """The platform's OpenAPI document (`GET /openapi.json`), built without starting anything:
    no database, no secrets read (the ones given are placeholders never used)."""
    placeholder = Settings(database_url="postgresql://unused@localhost/unused",
                           admin_token="x" * 32, jwt_secret="x" * 32)
    return create_app(placeholder).openapi()
