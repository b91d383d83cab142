"""Mail survives SMTP outages and server crashes: a real SMTP server (aiosmtpd) that is down
for a while, and a server process SIGKILLed after the account change committed and before the
mail went out.

These run in a module of their own: any server with an SMTP URL on the same database is a
sender (one sender across replicas), so no other module's server may be running and send
these mails to its own SMTP server.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx

from tests.accounts import mailbox, new_email, open_sign_up
from tests.scenario import AppWorld, expect
from tests.servers import start_server
from tests.smtp import SmtpServer

FAST_RETRIES = {"AUTHORIC_MAIL_RETRY_BASE": "0.2", "AUTHORIC_MAIL_POLL_INTERVAL": "0.2"}


def _sign_up(world: AppWorld, email: str) -> None:
    expect(world.admin.client.post(f"/{world.name}/auth/signup",
                                   json={"email": email, "password": "a long password"}), 202)


def _wait(condition: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_a_server_that_is_down_gets_the_mail_once_it_comes_back(
        database_url: str, tmp_path: Path) -> None:
    smtp = SmtpServer()  # not started yet
    proc = start_server(database_url, tmp_path, AUTHORIC_SMTP_URL=smtp.url, **FAST_RETRIES)
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            world = AppWorld.create(proc, client)
            open_sign_up(world)
            email = new_email()
            _sign_up(world, email)
            _wait(lambda: (mailbox(world)[0].get("error") or "") != "")
            assert mailbox(world)[0]["status"] == "pending"
            smtp.start()
            assert len(smtp.inbox.wait_for(email)) == 1
    finally:
        smtp.stop()
        proc.stop()


def test_a_server_killed_after_the_commit_sends_the_mail_once_after_its_restart(
        database_url: str, tmp_path: Path) -> None:
    smtp = SmtpServer()  # down while the change commits: the mail waits in the outbox
    proc = start_server(database_url, tmp_path, AUTHORIC_SMTP_URL=smtp.url, **FAST_RETRIES)
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            world = AppWorld.create(proc, client)
            open_sign_up(world)
            email = new_email()
            _sign_up(world, email)
            proc.stop(signal.SIGKILL)
            smtp.start()
            time.sleep(0.5)
            assert smtp.inbox.to(email) == []  # nobody is left to send it
            proc = start_server(database_url, tmp_path, port=int(proc.url.rsplit(":", 1)[1]),
                                AUTHORIC_SMTP_URL=smtp.url, **FAST_RETRIES)
            try:
                smtp.inbox.wait_for(email)
            except AssertionError:
                raise AssertionError((mailbox(world), proc.log())) from None
            time.sleep(1.0)
            assert len(smtp.inbox.to(email)) == 1
    finally:
        smtp.stop()
        proc.stop()
