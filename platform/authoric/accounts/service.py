"""The account flows of contract section 3: sign-up, verification, forgotten and changed
passwords, who am I, switching org, and sessions.

No answer tells whether an email has an account where the contract says so: sign-up with
verification required, resend and forgot answer the same for a known and an unknown email,
doing the same expensive work (a password hash) either way; the difference goes into the mail,
which only the address's owner reads.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric.accounts import mail_tokens
from authoric.accounts.caller import AccountCaller
from authoric.accounts.invitations import pending_invitations
from authoric.accounts.models import (
    EmailAddress,
    MailedToken,
    PasswordChange,
    PasswordReset,
    SignUp,
    SwitchOrg,
)
from authoric.auth.passwords import hash_password, verify_password
from authoric.auth.sessions import Transaction, issue, revoke_sessions
from authoric.catalog.apps import (
    MAX_PASSWORD_BYTES,
    AppSettings,
    app_settings,
    bump_version,
    find_app,
)
from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.errors import Conflict, Forbidden, NotFound, Unauthenticated, ValidationFailed
from authoric.mail.compose import Kind
from authoric.mail.postbox import Postbox
from authoric.tenancy.acting import parse_uid
from authoric.tenancy.service import insert_user

VERIFICATION_SENT = {"status": "verification_sent"}


def check_password(settings: AppSettings, password: str) -> None:
    """422 for a password under the app's `passwordMinLength` (characters) or over 1,024
    bytes (argon2 would hash a megabyte as readily; a login must not cost that)."""
    problem = None
    if len(password.encode()) > MAX_PASSWORD_BYTES:
        problem = f"at most {MAX_PASSWORD_BYTES} bytes"
    elif len(password) < settings.password_min_length:
        problem = f"at least {settings.password_min_length} characters"
    if problem is not None:
        raise ValidationFailed(f"the password must be {problem}", {"errors": [
            {"field": "password", "message": f"must be {problem}"}]})


async def sign_up(tx: Transaction, secret: str, app_ref: str, body: SignUp, postbox: Postbox,
                  user_agent: str | None) -> tuple[int, dict[str, Any]]:
    """(status, answer): 202 `verification_sent` with verification required, known email or
    not; with it off, 201 an account token pair, or 409 for a taken email. The password is
    hashed between two short transactions (as a sign-in checks one: auth.sessions.login)."""
    async with tx() as conn:
        app = await find_app(conn, app_ref)
    settings = app_settings(app["settings"])
    if settings.sign_up != "open":
        raise Forbidden("this app does not take sign-ups", {"reason": "sign_up_closed"})
    check_password(settings, body.password)
    email = body.email
    password_hash = await hash_password(body.password)  # known or not: the same work
    if settings.email_verification == "required":
        # Both mails composed, one of them written: a free and a taken address cost the same.
        token = mail_tokens.new_mail_token()
        verify = postbox.row(postbox.compose(app, "verify", email, token))
        taken = postbox.row(postbox.compose(app, "taken", email))
        async with tx() as conn:
            await mail_tokens.sign_up_and_mail(conn, app["uid"], email, password_hash, token,
                                               verify, taken)
        return 202, VERIFICATION_SENT
    async with tx() as conn:
        uid = await insert_user(conn, app["uid"], email, password_hash, verified=False)
        if uid is None:
            raise Conflict("a user with this email exists", {"email": email})
        return 201, await issue(conn, secret, app, uid, None, None, uuid7(), user_agent)


async def verify_email(conn: AsyncConnection, app: Any, body: MailedToken) -> dict[str, Any]:
    row = await mail_tokens.redeem_mail_token(conn, app["uid"], mail_tokens.VERIFY, body.token)
    await conn.execute(update(t.users).where(
        t.users.c.uid == row.user_uid, t.users.c.email == row.subject,
        t.users.c.email_verified_at.is_(None)).values(email_verified_at=func.now()))
    return {"verified": True}


async def resend_verification(conn: AsyncConnection, app: Any, body: EmailAddress,
                              postbox: Postbox) -> None:
    """A new verify mail to an account whose email is not verified yet; nothing otherwise,
    at the same cost (the answer is the same)."""
    await _mail_if_known(conn, app, body.email, postbox, mail_tokens.VERIFY, "verify",
                         unverified_only=True)


async def forgot_password(conn: AsyncConnection, app: Any, body: EmailAddress,
                          postbox: Postbox) -> None:
    """A reset mail to a known email; nothing for an unknown one, at the same cost (the
    answer is the same)."""
    await _mail_if_known(conn, app, body.email, postbox, mail_tokens.RESET, "reset")


async def _mail_if_known(conn: AsyncConnection, app: Any, email: str, postbox: Postbox,
                         purpose: str, kind: Kind, *, unverified_only: bool = False) -> None:
    """The `kind` mail and its token for `email`'s account, if it has one: composed whether
    or not, and written by one statement that writes nothing for an unknown address."""
    token = mail_tokens.new_mail_token()
    mail = postbox.row(postbox.compose(app, kind, email, token))
    await mail_tokens.issue_and_mail_if_known(conn, app["uid"], purpose, email, token, mail,
                                              unverified_only=unverified_only)


async def reset_password(conn: AsyncConnection, app: Any, body: PasswordReset) -> dict[str, Any]:
    """The new password; every session of the user ends, and every access token issued
    before now stops working (see `end_access_tokens`). The mail proved the address."""
    check_password(app_settings(app["settings"]), body.password)
    row = await mail_tokens.redeem_mail_token(conn, app["uid"], mail_tokens.RESET, body.token)
    password_hash = await hash_password(body.password)
    await conn.execute(update(t.users).where(t.users.c.uid == row.user_uid).values(
        password_hash=password_hash,
        email_verified_at=func.coalesce(t.users.c.email_verified_at, func.now())))
    await revoke_sessions(conn, row.user_uid)
    await end_access_tokens(conn, app["uid"], row.user_uid)
    return {"reset": True}


async def end_access_tokens(conn: AsyncConnection, app_uid: uuid.UUID, user_uid: uuid.UUID,
                            keep_org: uuid.UUID | None = None) -> None:
    """Every access token of the user issued so far stops working (but those for `keep_org`).
    An org token names its membership (`mid`), which every request checks as it looks up
    roles: each membership gets a new one. An account token names its session, which must be
    live (revoke_sessions ended them). The app's version moves so open streams re-judge
    their subscribers."""
    m = t.members
    await conn.execute(update(m).where(m.c.user_uid == user_uid, *(
        [] if keep_org is None else [m.c.org_uid != keep_org])).values(uid=func.gen_random_uuid()))
    await bump_version(conn, app_uid)


async def change_password(conn: AsyncConnection, caller: AccountCaller,
                          body: PasswordChange) -> None:
    """401 for a wrong `current`; the caller's session stays, every other one ends, and so do
    the access tokens of the user's other orgs (and every account token but the caller's).
    The caller's access token stays good (the contract answers 204, with no new token to
    replace it), so tokens of the caller's own org issued to other sessions live out their
    few minutes: their sessions can no longer refresh them."""
    if not await verify_password(caller.user.password_hash, body.current):
        raise Unauthenticated("the current password is wrong")
    check_password(app_settings(caller.app["settings"]), body.password)
    await conn.execute(update(t.users).where(t.users.c.uid == caller.user.uid)
                       .values(password_hash=await hash_password(body.password)))
    await revoke_sessions(conn, caller.user.uid, keep=caller.claims.session)
    await end_access_tokens(conn, caller.app["uid"], caller.user.uid,
                            keep_org=caller.claims.org_uid)


async def me(conn: AsyncConnection, caller: AccountCaller) -> dict[str, Any]:
    user = caller.user
    rows = await conn.execute(
        select(t.members.c.org_uid, t.orgs.c.name, t.members.c.roles)
        .join(t.orgs, t.orgs.c.uid == t.members.c.org_uid)
        .where(t.members.c.user_uid == user.uid).order_by(t.orgs.c.name))
    verified = user.email_verified_at is not None
    return {
        "user": {"uid": str(user.uid), "email": user.email, "emailVerified": verified,
                 "createdAt": rfc3339(user.created_at)},
        "org": None if caller.claims.org_uid is None else str(caller.claims.org_uid),
        "roles": list(caller.roles),
        "memberships": [{"org": str(r.org_uid), "orgName": r.name, "roles": list(r.roles)}
                        for r in rows],
        "invitations": await pending_invitations(conn, caller.app["uid"], user.email, verified),
    }


async def switch_org(conn: AsyncConnection, secret: str, caller: AccountCaller, body: SwitchOrg,
                     user_agent: str | None) -> dict[str, Any]:
    """A token pair (a new session) for another org of the caller's; 404 if not a member."""
    org = parse_uid(body.org, "org")
    membership = await conn.scalar(select(t.members.c.uid).where(
        t.members.c.org_uid == org, t.members.c.user_uid == caller.user.uid))
    if membership is None:
        raise NotFound("no such org", {"org": body.org})
    return await issue(conn, secret, caller.app, caller.user.uid, org, membership, uuid7(),
                       user_agent)


async def list_sessions(conn: AsyncConnection, user_uid: uuid.UUID,
                        current: uuid.UUID | None) -> dict[str, Any]:
    """The user's live sessions (one per refresh-token family), newest first."""
    rt = t.refresh_tokens
    rows = await conn.execute(
        select(rt.c.family, func.min(rt.c.created_at).label("created"),
               func.max(rt.c.created_at).label("used"),
               func.array_agg(rt.c.user_agent).label("agents"))
        .where(rt.c.user_uid == user_uid).group_by(rt.c.family)
        .having(func.bool_and(rt.c.revoked_at.is_(None)))
        .having(func.max(rt.c.expires_at) > func.now())
        .order_by(func.max(rt.c.created_at).desc()))
    return {"items": [{"id": str(r.family), "createdAt": rfc3339(r.created),
                       "lastUsedAt": rfc3339(r.used),
                       "userAgent": next((a for a in r.agents if a), None),
                       "current": r.family == current} for r in rows]}


async def end_session(conn: AsyncConnection, user_uid: uuid.UUID, session: str) -> None:
    """Revoke one of the user's sessions; 404 for one that is not theirs or not live."""
    family = parse_uid(session, "session")
    rt = t.refresh_tokens
    ended = await conn.execute(update(rt).where(
        rt.c.family == family, rt.c.user_uid == user_uid, rt.c.revoked_at.is_(None))
        .values(revoked_at=func.now()))
    if ended.rowcount == 0:
        raise NotFound("no such session", {"session": session})
