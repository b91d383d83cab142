"""Mail that really goes out: the outbox, the sender and a real SMTP server (aiosmtpd).

Callers: people signing up on a server with AUTHORIC_SMTP_URL; SMTP servers that accept,
that answer 451 first, that refuse a recipient for good (outages and crashes:
test_accounts_smtp_faults)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.accounts import (
    FAST_RETRIES,
    TOKEN_IN_LINK,
    mailbox,
    new_email,
    open_sign_up,
    sign_up,
    stranger_signed_up,
    wait_until_sent,
)
from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess, start_server
from tests.smtp import SmtpServer, body_text, html_text, self_signed
from tests.sse import db_fetch
from tests.waiting import wait_until

MAX_ATTEMPTS = 3


@pytest.fixture(scope="module")
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mailing_server(database_url: str, tmp_path_factory: pytest.TempPathFactory,
                   smtp: SmtpServer) -> Iterator[ServerProcess]:
    proc = start_server(database_url, tmp_path_factory.mktemp("smtp"),
                        AUTHORIC_SMTP_URL=smtp.url, AUTHORIC_MAIL_MAX_ATTEMPTS=str(MAX_ATTEMPTS),
                        **FAST_RETRIES)
    yield proc
    proc.stop()


@pytest.fixture
def mailing(mailing_server: ServerProcess) -> Iterator[AppWorld]:
    with httpx.Client(base_url=mailing_server.url, timeout=30) as client:
        world = AppWorld.create(mailing_server, client)
        open_sign_up(world, mailFrom="Acme <no-reply@acme.test>")
        yield world


def test_a_verify_mail_arrives_with_the_recipient_subject_and_a_working_link(
        mailing: AppWorld, smtp: SmtpServer) -> None:
    email = new_email()
    sign_up(mailing, email)
    [message] = smtp.inbox.wait_for(email)
    assert message["From"] == "Acme <no-reply@acme.test>"
    assert mailing.name in message["Subject"]
    text = body_text(message)
    found = TOKEN_IN_LINK.search(text)
    assert found and f"/{mailing.name}/auth/pages/verify#token=" in text
    assert found.group(1) in html_text(message)
    expect(mailing.admin.client.post(f"/{mailing.name}/auth/verify",
                                     json={"token": found.group(1)}), 200)
    wait_until(lambda: mailbox(mailing)[0]["status"] == "sent", "the mail sent")
    [kept] = mailbox(mailing)
    assert (kept["to"], kept["text"]) == (email, None)  # with SMTP the body is not kept


def test_a_server_answering_451_then_250_gets_the_mail_exactly_once(
        mailing: AppWorld, smtp: SmtpServer) -> None:
    email = new_email()
    smtp.inbox.refuse_next = 2
    refused_before = smtp.inbox.refused
    sign_up(mailing, email)
    smtp.inbox.wait_for(email)
    wait_until_sent(mailing, email)
    assert len(smtp.inbox.to(email)) == 1
    assert smtp.inbox.refused - refused_before == 2


def test_a_mail_the_server_refuses_for_good_is_marked_failed_with_its_answer(
        mailing: AppWorld, smtp: SmtpServer) -> None:
    email = new_email()
    smtp.inbox.unknown.add(email)
    sign_up(mailing, email)
    wait_until(lambda: mailbox(mailing)[0]["status"] != "pending", "the send's outcome")
    [mail] = mailbox(mailing)
    assert mail["status"] == "failed" and mail["error"].startswith("5")
    assert (mail["text"], mail["html"]) == (None, None)  # its verify link is not kept


def test_a_mail_refused_for_now_on_every_try_is_marked_failed_and_keeps_no_body(
        mailing: AppWorld, smtp: SmtpServer) -> None:
    email = new_email()
    smtp.inbox.refuse_next = MAX_ATTEMPTS
    sign_up(mailing, email)
    wait_until(lambda: mailbox(mailing)[0]["status"] != "pending", "the send's outcome")
    [mail] = mailbox(mailing)
    assert mail["status"] == "failed" and mail["error"].startswith("4")
    assert (mail["text"], mail["html"]) == (None, None)
    assert smtp.inbox.to(email) == []


def test_a_sign_up_whose_commit_fails_after_its_mail_was_queued_sends_no_mail(
        mailing: AppWorld, smtp: SmtpServer, database_url: str) -> None:
    """The verify mail is queued, then the transaction fails at its very commit (a deferred
    trigger the test puts on the outbox for one address): no mail goes out, none is in the
    mailbox, and no account was made. A later sign-up's mail, sent once the sender has gone
    past where the doomed one would be, shows the sender had its chance."""
    doomed, later = new_email(), new_email()
    name = f"authoric.fail_{uuid.uuid4().hex[:12]}"
    db_fetch(database_url, f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
                           "$$ BEGIN RAISE EXCEPTION 'the test fails this commit'; END $$")
    try:
        db_fetch(database_url, f"CREATE CONSTRAINT TRIGGER {name.split('.')[1]} AFTER INSERT "
                               "ON authoric.mail_outbox DEFERRABLE INITIALLY DEFERRED FOR EACH "
                               f"ROW WHEN (NEW.mail_to = '{doomed}') EXECUTE FUNCTION {name}()")
        failed = mailing.admin.client.post(f"/{mailing.name}/auth/signup", json={
            "email": doomed, "password": "a long password"})
        expect(failed, 500, "INTERNAL")
    finally:
        db_fetch(database_url, f"DROP FUNCTION {name}() CASCADE")
    sign_up(mailing, later)
    smtp.inbox.wait_for(later)
    wait_until_sent(mailing, later)
    assert [m["to"] for m in mailbox(mailing)] == [later]
    assert smtp.inbox.to(doomed) == []
    users = expect(mailing.admin.get(f"{mailing.base}/users"), 200)["items"]
    assert [u["email"] for u in users] == [later]


@pytest.mark.parametrize("tls", ["starttls", "implicit"])
# aiosmtpd warns, per connection, of AUTH without STARTTLS; with implicit TLS every byte is TLS
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_mail_goes_out_over_tls_to_a_server_that_takes_only_its_login(
        tls: str, database_url: str, tmp_path: Path) -> None:
    """`smtp://user:pass@host` upgrades with STARTTLS (a server requiring it refuses
    everything before); `smtps://` speaks TLS from the first byte; either way the server
    takes the mail only after the login, which it accepts only over TLS. The server trusts
    the SMTP server's certificate as it would a CA's (SSL_CERT_FILE)."""
    cert = self_signed(tmp_path)
    smtp = SmtpServer(tls=tls, cert=cert, login=("mailer", "s3cret pass")).start()
    proc = start_server(database_url, tmp_path, AUTHORIC_SMTP_URL=smtp.url,
                        SSL_CERT_FILE=str(cert[0]), **FAST_RETRIES)
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            world = AppWorld.create(proc, client)
            email = stranger_signed_up(world)
            [message] = smtp.inbox.wait_for(email)
            assert TOKEN_IN_LINK.search(body_text(message))
            assert smtp.logins == ["mailer"]
    finally:
        proc.stop()
        smtp.stop()
