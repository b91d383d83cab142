"""`/admin/apps/{app}/webhooks` (contract section 8), for the platform admin token.

Each change is audited by the admin edge (`http/admin_audit.py`), which drops the secret
from the entry: it is in the answers of create and rotate only.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from authoric.http.admin import require_admin
from authoric.http.bodies import ERROR_RESPONSES, TypedRoute, body_of
from authoric.http.context import services
from authoric.webhooks import store
from authoric.webhooks.model import (
    DeliveryList,
    NewWebhook,
    Replay,
    TestSend,
    WebhookChange,
    WebhookList,
    WebhookView,
    WebhookWithSecret,
)
from authoric.webhooks.targets import check_url
from authoric.webhooks.worker import Deliverer

router = APIRouter(prefix="/admin/apps/{app}/webhooks", tags=["webhooks"],
                   dependencies=[Depends(require_admin)], route_class=TypedRoute,
                   responses=ERROR_RESPONSES)

NewWebhookBody = Annotated[NewWebhook, Depends(body_of(NewWebhook))]
WebhookChangeBody = Annotated[WebhookChange, Depends(body_of(WebhookChange))]
ReplayBody = Annotated[Replay, Depends(body_of(Replay))]


def _url_check(request: Request) -> store.CheckUrl:
    """The server's URL rule (webhooks.targets `check_url`) with its operator's setting."""
    allow_private = services(request).settings.webhook_allow_private
    return lambda url: check_url(url, allow_private)


@router.post("", status_code=201, response_model=WebhookWithSecret)
async def create_webhook(request: Request, app: str, body: NewWebhookBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await store.create_webhook(conn, app, body, _url_check(request))


@router.get("", response_model=WebhookList)
async def list_webhooks(request: Request, app: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return {"items": await store.list_webhooks(conn, app)}


@router.get("/{uid}", response_model=WebhookView)
async def get_webhook(request: Request, app: str, uid: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await store.get_webhook(conn, app, uid)


@router.patch("/{uid}", response_model=WebhookView)
async def patch_webhook(request: Request, app: str, uid: str,
                        body: WebhookChangeBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await store.patch_webhook(conn, app, uid, body, _url_check(request))


@router.delete("/{uid}", status_code=204)
async def delete_webhook(request: Request, app: str, uid: str) -> Response:
    async with services(request).tx() as conn:
        await store.delete_webhook(conn, app, uid)
    return Response(status_code=204)


@router.post("/{uid}/secret", response_model=WebhookWithSecret)
async def rotate_webhook_secret(request: Request, app: str, uid: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await store.rotate_secret(conn, app, uid)


@router.get("/{uid}/deliveries", response_model=DeliveryList)
async def list_webhook_deliveries(request: Request, app: str, uid: str, limit: str | None = None,
                                  after: str | None = None) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await store.list_deliveries(conn, app, uid, limit, after)


@router.post("/{uid}/replay", response_model=WebhookView)
async def replay_webhook(request: Request, app: str, uid: str, body: ReplayBody) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await store.replay(conn, app, uid, body)


@router.post("/{uid}/test", response_model=TestSend)
async def test_webhook(request: Request, app: str, uid: str) -> dict[str, Any]:
    """Not in the contract: the console's "send a test". One signed `{"type": "test"}` POST,
    outside the change log (its `webhook-id` is `test_...`); nothing is recorded or moved."""
    async with services(request).tx() as conn:
        url, secret, app_name = await store.target_of(conn, app, uid)
    deliverer: Deliverer = request.app.state.webhooks
    return await deliverer.test_send(url, secret, app_name)
