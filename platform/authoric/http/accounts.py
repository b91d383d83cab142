"""`/{app}/auth/...` account routes and `POST /{app}/orgs` (contract sections 3 and 3a): the
edge of accounts.service. Routes that send mail or redeem a mailed token are throttled per
client address and per email before anything else (auth.ratelimit, MAIL counters)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from authoric.accounts import service
from authoric.accounts.caller import account_caller
from authoric.accounts.models import (
    EmailAddress,
    MailedToken,
    NewMemberOrg,
    PasswordChange,
    PasswordReset,
    SignUp,
    SwitchOrg,
)
from authoric.accounts.orgs import create_member_org
from authoric.auth.ratelimit import MAIL
from authoric.catalog.apps import find_app
from authoric.http.bodies import ERROR_RESPONSES, Body, TypedRoute
from authoric.http.context import Services, services
from authoric.http.sessions import throttle
from authoric.mail.postbox import Postbox

router = APIRouter(tags=["accounts"], route_class=TypedRoute, responses=ERROR_RESPONSES)

ACCEPTED = {"status": "accepted"}


async def signed_bearer(request: Request, app: str) -> None:
    """Authenticates the bearer (401 for a missing, bad, revoked or other app's token) in a
    short transaction of its own: a route dependency listed before the body's, so that such a
    caller gets 401 whatever the body holds (contract section 1: authenticate first). The route
    then resolves its caller again, in its own transaction."""
    svc = services(request)
    async with svc.tx() as conn:
        await account_caller(conn, svc.tokens, request.headers.get("authorization"), app)


def postbox(request: Request) -> Postbox:
    """How this request's mail is queued. Links to the server's own pages start with
    `AUTHORIC_PUBLIC_URL`, or else the address of the socket the request came in on (never
    the Host header, which a client could point at a server of its own to collect tokens)."""
    svc = services(request)
    base = svc.settings.public_url
    if not base:
        host, port = request.scope.get("server") or ("127.0.0.1", 80)
        host = f"[{host}]" if ":" in str(host) else host
        base = f"{request.url.scheme}://{host}:{port}"
    return Postbox(smtp=svc.mail_sender is not None, default_from=svc.settings.mail_from,
                   base_url=base)


def mail_committed(svc: Services) -> None:
    """Tell the sender a mail was committed (with SMTP), so it goes out without waiting."""
    if svc.mail_sender is not None:
        svc.mail_sender.nudge()


@router.post("/{app}/auth/signup", status_code=202)
async def sign_up(request: Request, app: str, body: Body[SignUp]) -> JSONResponse:
    svc = services(request)
    async with svc.password_work:
        await throttle(request, app, body.normalized_email, MAIL)
        status, answer = await service.sign_up(svc.tx, svc.jwt_secret, app, body,
                                               postbox(request), request.headers.get("user-agent"))
    mail_committed(svc)
    return JSONResponse(answer, status_code=status)


@router.post("/{app}/auth/verify")
async def verify(request: Request, app: str, body: Body[MailedToken]) -> dict[str, Any]:
    await throttle(request, app, None, MAIL)
    svc = services(request)
    async with svc.tx() as conn:
        return await service.verify_email(conn, await find_app(conn, app), body)


@router.post("/{app}/auth/verify/resend", status_code=202)
async def resend(request: Request, app: str, body: Body[EmailAddress]) -> dict[str, Any]:
    await throttle(request, app, body.normalized_email, MAIL)
    svc = services(request)
    async with svc.tx() as conn:
        await service.resend_verification(conn, await find_app(conn, app), body,
                                          postbox(request))
    mail_committed(svc)
    return ACCEPTED


@router.post("/{app}/auth/password/forgot", status_code=202)
async def forgot(request: Request, app: str, body: Body[EmailAddress]) -> dict[str, Any]:
    await throttle(request, app, body.normalized_email, MAIL)
    svc = services(request)
    async with svc.tx() as conn:
        await service.forgot_password(conn, await find_app(conn, app), body, postbox(request))
    mail_committed(svc)
    return ACCEPTED


@router.post("/{app}/auth/password/reset")
async def reset(request: Request, app: str, body: Body[PasswordReset]) -> dict[str, Any]:
    svc = services(request)
    async with svc.password_work:
        await throttle(request, app, None, MAIL)
        async with svc.tx() as conn:
            return await service.reset_password(conn, await find_app(conn, app), body)


@router.post("/{app}/auth/password", status_code=204, dependencies=[Depends(signed_bearer)])
async def change_password(request: Request, app: str, body: Body[PasswordChange]) -> Response:
    svc = services(request)
    async with svc.password_work, svc.tx() as conn:
        caller = await account_caller(conn, svc.tokens, request.headers.get("authorization"), app)
        await service.change_password(conn, caller, body)
    return Response(status_code=204)


@router.get("/{app}/auth/me")
async def me(request: Request, app: str) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        caller = await account_caller(conn, svc.tokens, request.headers.get("authorization"), app)
        return await service.me(conn, caller)


@router.post("/{app}/auth/switch", dependencies=[Depends(signed_bearer)])
async def switch(request: Request, app: str, body: Body[SwitchOrg]) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        caller = await account_caller(conn, svc.tokens, request.headers.get("authorization"), app)
        return await service.switch_org(conn, svc.jwt_secret, caller, body,
                                        request.headers.get("user-agent"))


@router.get("/{app}/auth/sessions")
async def list_sessions(request: Request, app: str) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        caller = await account_caller(conn, svc.tokens, request.headers.get("authorization"), app)
        return await service.list_sessions(conn, caller.user.uid, caller.claims.session)


@router.delete("/{app}/auth/sessions/{session}", status_code=204)
async def end_session(request: Request, app: str, session: str) -> Response:
    svc = services(request)
    async with svc.tx() as conn:
        caller = await account_caller(conn, svc.tokens, request.headers.get("authorization"), app)
        await service.end_session(conn, caller.user.uid, session)
    return Response(status_code=204)


@router.post("/{app}/orgs", status_code=201, dependencies=[Depends(signed_bearer)])
async def create_org(request: Request, app: str, body: Body[NewMemberOrg]) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        caller = await account_caller(conn, svc.tokens, request.headers.get("authorization"), app)
        return await create_member_org(conn, svc.jwt_secret, caller, body,
                                       request.headers.get("user-agent"))
