"""Helpers for the account tests: an app with sign-up open, and its mailbox read as the admin."""

from __future__ import annotations

import re
from typing import Any

from tests.scenario import AppWorld, Caller, expect, unique
from tests.waiting import wait_until

TOKEN_IN_LINK = re.compile(r"token=([A-Za-z0-9_\-]+)")


def open_sign_up(world: AppWorld, **settings: Any) -> None:
    expect(world.admin.patch(world.base, json={"settings": {"signUp": "open", **settings}}), 200)


def mailbox(world: AppWorld) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = expect(world.admin.get(f"{world.base}/mail"), 200)["items"]
    return items


def mails_to(world: AppWorld, email: str) -> list[dict[str, Any]]:
    return [m for m in mailbox(world) if m["to"] == email]


def token_in(mail: dict[str, Any]) -> str:
    found = TOKEN_IN_LINK.search(mail["text"])
    assert found, mail["text"]
    return found.group(1)


def new_email() -> str:
    return f"{unique('person')}@example.com"


def signed_up(world: AppWorld, password: str = "a long password") -> dict[str, Any]:
    """A person who signed up and verified their email: email, password, uid."""
    email = new_email()
    client = world.admin.client
    expect(client.post(f"/{world.name}/auth/signup", json={"email": email, "password": password}),
           202)
    expect(client.post(f"/{world.name}/auth/verify",
                       json={"token": token_in(mails_to(world, email)[0])}), 200)
    return {"email": email, "password": password}


def account_caller(world: AppWorld, person: dict[str, Any], org: str | None = None) -> Caller:
    body = {"email": person["email"], "password": person["password"]}
    if org is not None:
        body["org"] = org
    pair = expect(world.admin.client.post(f"/{world.name}/auth/token", json=body), 200)
    return Caller(world.admin.client, pair["access_token"], pair["refresh_token"])


def without_request_id(body: Any) -> Any:
    """An answer with the request id taken out of an error's details (it differs per request)."""
    if isinstance(body, dict) and "error" in body:
        details = {k: v for k, v in body["error"]["details"].items() if k != "requestId"}
        return {"error": {**body["error"], "details": details}}
    return body


# A server's mail sender retrying every 0.2 s (doubling) and looking at the outbox as often.
FAST_RETRIES = {"AUTHORIC_MAIL_RETRY_BASE": "0.2", "AUTHORIC_MAIL_POLL_INTERVAL": "0.2"}


def sign_up(world: AppWorld, email: str, password: str = "a long password") -> None:
    """`email` signs up (202: the app requires verification)."""
    expect(world.admin.client.post(f"/{world.name}/auth/signup",
                                   json={"email": email, "password": password}), 202)


def stranger_signed_up(world: AppWorld) -> str:
    """A new email signed up to `world`, its sign-up opened first (the email)."""
    open_sign_up(world)
    email = new_email()
    sign_up(world, email)
    return email


def wait_until_sent(world: AppWorld, email: str) -> None:
    """Until the outbox marks every mail to `email` sent: the sender never tries a sent mail
    again, so what the SMTP server holds for it is then final."""
    wait_until(lambda: bool(mails_to(world, email))
               and all(m["status"] == "sent" for m in mails_to(world, email)),
               f"every mail to {email} sent", timeout=90)
