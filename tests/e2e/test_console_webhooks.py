"""The console's Webhooks page in Chromium, delivering to real receivers (tests/receivers.py).

The operator creates a webhook from the page: its signing secret is shown once, and the test
send it makes shows the receiver's answer. The page lists the last deliveries with their
positions, HTTP status codes and durations; the operator pauses and resumes (a change written
while paused reaches the receiver only after the resume), replays from a position (the
receiver gets the same `webhook-id`s again), rotates the secret (a new one is shown and signs
what follows), and sees a webhook whose receiver keeps answering 500 turn failing, on the open
page, without reloading it.

This module's server delivers webhooks to private targets (the receivers listen on 127.0.0.1)
and retries after 50-200 ms, as the one of tests/api/test_webhooks_delivery.py does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from tests.api.test_webhooks_delivery import let_go
from tests.e2e.conftest import confirm, go
from tests.receivers import DELIVERING, Received, Receiver
from tests.scenario import AppWorld, Caller
from tests.scenario import expect as expect_status
from tests.servers import ServerProcess, start_server
from tests.waiting import wait_until

COLUMNS: list[dict[str, Any]] = [{"name": "number", "type": "text", "required": True},
                                 {"name": "amount", "type": "numeric"}]
WAIT = 90.0  # seconds a condition may take on this slow, shared machine before a test fails
DURATION = re.compile(r"^\d+\.\d ms$")


@pytest.fixture(scope="module")
def server(database_url: str, data_dir: Path) -> Iterator[ServerProcess]:
    """This module's server in place of the session's (tests/conftest.py), which delivers no
    webhooks: the browser and `world` fixtures take this one."""
    proc = start_server(database_url, data_dir,
                        **DELIVERING)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def receivers(world: AppWorld) -> Iterator[Callable[[], Receiver]]:
    """Starts receivers; afterwards deletes the app's webhooks (one left active would be
    delivered by the next server that delivers webhooks) and stops the receivers."""
    started: list[Receiver] = []

    def start() -> Receiver:
        receiver = Receiver().start()
        started.append(receiver)
        return receiver

    yield start
    for hook in expect_status(world.admin.get(f"{world.base}/webhooks"), 200)["items"]:
        world.admin.delete(f"{world.base}/webhooks/{hook['uid']}")
    for receiver in started:
        receiver.stop()


@pytest.fixture
def clerk(world: AppWorld) -> Caller:
    """A clerk of North who writes invoices over REST."""
    world.table("invoices", COLUMNS)
    world.role("clerk", ["invoices:*"])
    return world.caller(world.org("North"), ["clerk"])


def invoice(world: AppWorld, clerk: Caller, number: str) -> dict[str, Any]:
    return dict(expect_status(clerk.post(world.rows("invoices"),
                                         json={"number": number, "amount": "10.00"}), 201))


def changes(receiver: Receiver) -> list[Received]:
    """Each change the receiver got, once per `webhook-id` (test sends left out)."""
    return [got for got in receiver.first_seen() if not got.id.startswith("test_")]


def numbers(received: list[Received]) -> list[str]:
    return [got.json()["row"]["number"] for got in received]


def hook_of(world: AppWorld, receiver: Receiver) -> dict[str, Any]:
    """The webhook to `receiver`, as the API lists it."""
    items = expect_status(world.admin.get(f"{world.base}/webhooks"), 200)["items"]
    [hook] = [h for h in items if h["url"] == receiver.url]
    return dict(hook)


def recorded(world: AppWorld, uid: str) -> list[dict[str, Any]]:
    """The webhook's deliveries log (newest first)."""
    return list(expect_status(world.admin.get(f"{world.base}/webhooks/{uid}/deliveries"),
                              200)["items"])


def hook_row(page: Page, receiver: Receiver) -> Locator:
    """The row of the webhooks table for the webhook to `receiver`."""
    return page.get_by_test_id("webhooks").get_by_role("row").filter(has_text=receiver.url)


def status_cell(row: Locator) -> Locator:
    return row.get_by_role("cell").nth(3)  # URL, Tables, Role, Status, Position, actions


def delivery_rows(page: Page) -> Locator:
    """The rows of the open deliveries table (newest first), its header left out."""
    return page.get_by_test_id("deliveries").get_by_role("row").filter(
        has=page.get_by_role("cell"))


def delivered_positions(page: Page) -> list[str]:
    """The Position column of the open deliveries table."""
    return [row.get_by_role("cell").first.inner_text() for row in delivery_rows(page).all()]


def submit_new_webhook(page: Page, receiver: Receiver) -> None:
    """Fills the New webhook form (`invoices` to `receiver`) and submits it."""
    page.get_by_label("Webhook URL").fill(receiver.url)
    page.get_by_role("group", name="Tables").get_by_label("invoices").check()
    page.get_by_role("button", name="Create and send a test").click()


def create_webhook(page: Page, receiver: Receiver) -> str:
    """Creates a webhook of `invoices` to `receiver` from the page; returns the secret it
    shows, once the test send's answer is in the webhook's row, and dismisses it."""
    submit_new_webhook(page, receiver)
    shown = page.get_by_test_id("webhook-secret")
    expect(shown).to_contain_text("whsec_")
    secret = shown.locator("code").inner_text()
    expect(hook_row(page, receiver).get_by_test_id("test-send")).to_contain_text("test: HTTP")
    shown.get_by_role("button", name="Done").click()
    expect(shown).to_have_count(0)
    return secret


def test_operator_creates_a_webhook_sends_a_test_and_sees_its_deliveries(
        console: Page, world: AppWorld, clerk: Caller,
        receivers: Callable[[], Receiver]) -> None:
    receiver = receivers()
    go(console, world, "webhooks")
    expect(console.get_by_test_id("webhooks")).to_contain_text("No webhook yet.")
    submit_new_webhook(console, receiver)

    # The secret is shown once; the test send's answer is in the webhook's row.
    shown = console.get_by_test_id("webhook-secret")
    expect(shown).to_contain_text("Signing secret (shown once): whsec_")
    secret = shown.locator("code").inner_text()
    row = hook_row(console, receiver)
    expect(row.get_by_test_id("test-send")).to_have_text(
        re.compile(r"^test: HTTP 200 in \d+(\.\d+)? ms$"))
    expect(status_cell(row)).to_have_text(re.compile(r"^active"))
    expect(row).to_contain_text("invoices")
    [test] = receiver.received()
    assert test.id.startswith("test_")
    assert Webhook(secret).verify(test.body, test.headers)["type"] == "test"
    shown.get_by_role("button", name="Done").click()
    console.reload()
    expect(row).to_be_visible()
    expect(console.get_by_test_id("webhook-secret")).to_have_count(0)
    expect(console.locator("body")).not_to_contain_text("whsec_")

    # Three changes: each delivered, then listed with its position, status and duration.
    for number in ("N-1", "N-2", "N-3"):
        invoice(world, clerk, number)
    receiver.wait_for(lambda _: len(changes(receiver)) >= 3, WAIT, "three changes")
    got = changes(receiver)
    assert numbers(got) == ["N-1", "N-2", "N-3"]
    uid = hook_of(world, receiver)["uid"]
    wait_until(lambda: len(recorded(world, uid)) >= 3, "the deliveries log", timeout=WAIT)
    row.get_by_role("button", name="Deliveries").click()
    # Position, attempt, at, HTTP status, duration, error; newest first.
    expect(delivery_rows(console).get_by_role("cell")).to_have_text(
        [text for delivered in reversed(got)
         for text in (delivered.id, "1", re.compile(r"\d"), "200", DURATION, "")])
    console.reload()
    expect(row.get_by_role("cell").nth(4)).to_have_text(got[-1].id)  # the cursor


def test_operator_pauses_and_resumes_a_webhook_and_what_was_written_meanwhile_arrives_after(
        console: Page, world: AppWorld, server: ServerProcess, clerk: Caller,
        receivers: Callable[[], Receiver]) -> None:
    receiver, control = receivers(), receivers()
    go(console, world, "webhooks")
    create_webhook(console, receiver)
    create_webhook(console, control)  # stays active: shows when a write has been delivered
    invoice(world, clerk, "before")
    receiver.wait_for(lambda _: numbers(changes(receiver)) == ["before"], WAIT, "the first")

    row = hook_row(console, receiver)
    row.get_by_role("button", name="Pause").click()
    expect(status_cell(row)).to_have_text(re.compile(r"^paused"))
    expect(row.get_by_role("button", name="Pause")).to_have_count(0)
    let_go(server, hook_of(world, receiver)["uid"], WAIT)  # nothing in flight to it now
    invoice(world, clerk, "while paused")
    control.wait_for(lambda _: numbers(changes(control)) == ["before", "while paused"], WAIT,
                     "the write made while paused, at the active webhook")
    assert numbers(changes(receiver)) == ["before"]

    row.get_by_role("button", name="Resume").click()
    expect(status_cell(row)).to_have_text(re.compile(r"^active"))
    expect(row.get_by_role("button", name="Resume")).to_have_count(0)
    receiver.wait_for(lambda _: numbers(changes(receiver)) == ["before", "while paused"], WAIT,
                      "the write made while paused, after the resume")
    expect(status_cell(hook_row(console, control))).to_have_text(re.compile(r"^active"))


def test_operator_replays_from_a_position_and_rotates_the_secret(
        console: Page, world: AppWorld, clerk: Caller,
        receivers: Callable[[], Receiver]) -> None:
    receiver = receivers()
    go(console, world, "webhooks")
    first_secret = create_webhook(console, receiver)
    for number in ("N-1", "N-2", "N-3"):
        invoice(world, clerk, number)
    receiver.wait_for(lambda _: len(changes(receiver)) >= 3, WAIT, "three changes")
    got = changes(receiver)
    uid = hook_of(world, receiver)["uid"]
    wait_until(lambda: len(recorded(world, uid)) >= 3, "the deliveries log", timeout=WAIT)

    # Replay from the second position: the receiver gets the second and third again.
    row = hook_row(console, receiver)
    row.get_by_role("button", name="Deliveries").click()
    expect(delivery_rows(console)).to_have_count(3)
    sent_before = len(receiver.received())
    console.get_by_label("Replay from position").fill(got[1].id)
    console.get_by_role("button", name="Replay", exact=True).click()
    confirm(console, "Replay", f"receives again every change from position {got[1].id}")
    receiver.wait_for(lambda _: len(receiver.received()) >= sent_before + 2, WAIT, "the replay")
    again = receiver.received()[sent_before:]
    assert [r.id for r in again] == [got[1].id, got[2].id]
    assert numbers(again) == ["N-2", "N-3"]
    wait_until(lambda: len(recorded(world, uid)) >= 5, "the replay in the deliveries log", timeout=WAIT)
    row.get_by_role("button", name="Deliveries").click()
    expect(delivery_rows(console)).to_have_count(5)
    assert sorted(delivered_positions(console)) == sorted(
        [got[0].id, got[1].id, got[1].id, got[2].id, got[2].id])

    # Rotate: a new secret is shown; it signs what follows, and the first no longer does.
    row.get_by_role("button", name="Rotate secret").click()
    confirm(console, "Rotate", "the old secret stops verifying at once")
    shown = console.get_by_test_id("webhook-secret")
    expect(shown).to_contain_text("whsec_")
    second_secret = shown.locator("code").inner_text()
    assert second_secret.startswith("whsec_") and second_secret != first_secret
    invoice(world, clerk, "N-4")
    receiver.wait_for(lambda _: "N-4" in numbers(changes(receiver)), WAIT, "N-4")
    [last] = [r for r in changes(receiver) if r.json()["row"]["number"] == "N-4"]
    assert Webhook(second_secret).verify(last.body, last.headers)["row"]["number"] == "N-4"
    with pytest.raises(WebhookVerificationError):
        Webhook(first_secret).verify(last.body, last.headers)


def test_operator_sees_a_webhook_whose_receiver_answers_500_turn_failing_and_resumes_it(
        console: Page, world: AppWorld, server: ServerProcess, clerk: Caller,
        receivers: Callable[[], Receiver]) -> None:
    expect_status(world.admin.patch(world.base, json={"settings": {"webhookRetryHours": 0.0003}}),
                  200)  # about a second of retries before the webhook turns failing
    receiver = receivers()
    receiver.answer = lambda _: (500, {})
    go(console, world, "webhooks")
    create_webhook(console, receiver)
    row = hook_row(console, receiver)
    expect(row.get_by_test_id("test-send")).to_contain_text("test: HTTP 500 in")
    invoice(world, clerk, "N-1")
    uid = wait_until(lambda: (hook := hook_of(world, receiver))["status"] == "failing"
                     and hook["uid"], "the webhook to turn failing", timeout=WAIT)
    let_go(server, uid, WAIT)  # failing: nothing more is tried

    # Without a reload: the page reads its webhooks again every few seconds.
    expect(status_cell(row)).to_have_text(re.compile(r"^failing"), timeout=WAIT * 1000)
    expect(status_cell(row)).to_contain_text("since")
    expect(row).to_have_class(re.compile(r"\bfailing\b"))  # the row stands out
    row.get_by_role("button", name="Deliveries").click()
    [position] = [r.id for r in changes(receiver)]
    attempts = delivery_rows(console)
    expect(attempts.first.get_by_role("cell")).to_have_text(
        [position, re.compile(r"^\d+$"), re.compile(r"\d"), "500", DURATION, "HTTP 500"])
    assert len(attempts.all()) >= 2 and set(delivered_positions(console)) == {position}

    # Once the receiver answers again, the operator resumes it and the change arrives.
    receiver.answer = None
    sent = len(receiver.received())
    row.get_by_role("button", name="Resume").click()
    expect(status_cell(row)).to_have_text(re.compile(r"^active"))
    receiver.wait_for(lambda _: len(receiver.received()) > sent, WAIT, "N-1 after the resume")
    assert [r.id for r in receiver.received()[sent:]] == [position]
    wait_until(lambda: recorded(world, uid)[0]["status"] == 200, "the success in the log", timeout=WAIT)
    row.get_by_role("button", name="Deliveries").click()
    expect(attempts.first.get_by_role("cell").nth(3)).to_have_text("200")  # newest first
