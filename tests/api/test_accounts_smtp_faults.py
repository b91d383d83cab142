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

from tests.accounts import (
    FAST_RETRIES,
    mailbox,
    stranger_signed_up,
    wait_until_sent,
)
from tests.scenario import AppWorld
from tests.servers import ServerProcess, start_server
from tests.smtp import SmtpServer
from tests.waiting import wait_until


def _mailing(database_url: str, tmp_path: Path, smtp: SmtpServer,
             port: int | None = None) -> ServerProcess:
    return start_server(database_url, tmp_path, port, AUTHORIC_SMTP_URL=smtp.url, **FAST_RETRIES)


def test_a_server_that_is_down_gets_the_mail_once_it_comes_back(
        database_url: str, tmp_path: Path) -> None:
    smtp = SmtpServer()  # not started yet
    proc = _mailing(database_url, tmp_path, smtp)
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            world = AppWorld.create(proc, client)
            email = stranger_signed_up(world)
            wait_until(lambda: (mailbox(world)[0].get("error") or "") != "", "the error")
            assert mailbox(world)[0]["status"] == "pending"
            smtp.start()
            assert len(smtp.inbox.wait_for(email)) == 1
    finally:
        smtp.stop()
        proc.stop()


def test_a_server_killed_after_the_commit_sends_the_mail_once_after_its_restart(
        database_url: str, tmp_path: Path) -> None:
    smtp = SmtpServer()  # down while the change commits: the mail waits in the outbox
    proc = _mailing(database_url, tmp_path, smtp)
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            world = AppWorld.create(proc, client)
            email = stranger_signed_up(world)
            proc.stop(signal.SIGKILL)
            smtp.start()
            time.sleep(0.5)
            assert smtp.inbox.to(email) == []  # nobody is left to send it
            proc = _mailing(database_url, tmp_path, smtp, int(proc.url.rsplit(":", 1)[1]))
            smtp.inbox.wait_for(email)
            wait_until_sent(world, email)
            assert len(smtp.inbox.to(email)) == 1
    finally:
        smtp.stop()
        proc.stop()
