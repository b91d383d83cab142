"""The server's own account pages in Chromium: a person opens the link from their mail and
the page does the step (verify, reset), with no console, under a CSP with no inline script."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from tests.accounts import mails_to, new_email, open_sign_up, sign_up, token_in
from tests.e2e.conftest import new_page
from tests.scenario import AppWorld
from tests.scenario import expect as expect_status

LINK = "http://"  # mail links to the server's pages start with the server's address


def _link(mail: dict[str, str]) -> str:
    return next(word for word in mail["text"].split() if word.startswith(LINK))


def _signed_up(world: AppWorld) -> tuple[str, dict[str, str]]:
    """A new person's email and their verify mail, on an app with sign-up open."""
    open_sign_up(world)
    email = new_email()
    sign_up(world, email)
    [mail] = mails_to(world, email)
    return email, mail


def test_a_person_opening_the_verify_link_from_their_mail_is_verified(
        browser: Browser, world: AppWorld) -> None:
    email, mail = _signed_up(world)
    client = world.admin.client
    page = new_page(browser)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text)
            if message.type == "error" else None)
    response = page.goto(_link(mail))
    assert response is not None
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    expect(page.get_by_role("status")).to_have_text(
        "Your email address is verified. You can sign in now.")
    assert "#token" not in page.url  # taken out of the address bar
    assert errors == []
    page.context.close()
    expect_status(client.post(f"/{world.name}/auth/token", json={
        "email": email, "password": "a long password"}), 200)


def test_a_person_opening_a_used_verify_link_is_told_to_ask_for_a_new_one(
        browser: Browser, world: AppWorld) -> None:
    _, mail = _signed_up(world)
    client = world.admin.client
    expect_status(client.post(f"/{world.name}/auth/verify", json={"token": token_in(mail)}), 200)
    page = new_page(browser)
    page.goto(_link(mail))
    expect(page.get_by_role("status")).to_contain_text("invalid, already used or expired")
    page.context.close()


def test_a_person_choosing_a_new_password_on_the_reset_page_signs_in_with_it(
        browser: Browser, world: AppWorld) -> None:
    user = world.user()
    client = world.admin.client
    expect_status(client.post(f"/{world.name}/auth/password/forgot",
                              json={"email": user["email"]}), 202)
    [mail] = mails_to(world, user["email"])
    page = new_page(browser)
    page.goto(_link(mail))
    page.get_by_label("New password").fill("a brand new password")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text(
        "Your password is changed. You can sign in with it now.")
    page.context.close()
    expect_status(client.post(f"/{world.name}/auth/token", json={
        "email": user["email"], "password": "a brand new password"}), 200)
