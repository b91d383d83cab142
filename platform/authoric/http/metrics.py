"""`GET /metrics`: Prometheus text (see observability.metrics for what is in it).

On the main port, for a bearer token: the admin token, or `AUTHORIC_METRICS_TOKEN` when set
(so a scraper need not hold the admin token). The figures are platform-wide (request counts,
log positions), never tenant data, but they are an operator's, not the public's.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request, Response
from sqlalchemy import text

from authoric.auth.principals import bearer
from authoric.errors import Unauthenticated
from authoric.http.context import services
from authoric.observability.metrics import CONTENT_TYPE, DB_FIGURES, Metrics

router = APIRouter(tags=["health"])


def _may_scrape(request: Request) -> bool:
    svc = services(request)
    token = bearer(request.headers.get("authorization")).encode()
    allowed = [svc.admin_token, svc.settings.metrics_token]
    # Every comparison is made, so timing says nothing about which token was close.
    return any([hmac.compare_digest(token, t.encode()) for t in allowed if t])


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    if not _may_scrape(request):
        raise Unauthenticated("the admin token or the metrics token is required")
    svc = services(request)
    async with svc.engine.connect() as conn:
        figures = dict((await conn.execute(text(DB_FIGURES))).mappings().one())
    registry: Metrics = request.app.state.metrics
    body = registry.render(figures, request.app.state.source.position)
    return Response(body, media_type=CONTENT_TYPE)
