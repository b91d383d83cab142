"""The console's account pages in Chromium: the operator opens sign-up in the app's settings,
a person signs up, and the Mail page shows the verification mail; the users list says who is
verified and shows each user's sessions, with revoke."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.accounts import new_email
from tests.e2e.conftest import confirm, go
from tests.scenario import AppWorld
from tests.scenario import expect as expect_status


def test_the_operator_opens_sign_up_and_reads_the_verification_mail_on_the_mail_page(
        console: Page, world: AppWorld) -> None:
    go(console, world, "settings")
    accounts = console.get_by_role("form", name="Accounts")
    accounts.get_by_label("Sign-up").select_option("open")
    accounts.get_by_label("Mail from").fill("Acme <no-reply@acme.test>")
    accounts.get_by_role("button", name="Save account settings").click()
    confirm(console, "Apply", "Sign-up: open")
    expect(console.get_by_role("status")).to_have_text("Account settings saved")
    settings = expect_status(world.admin.get(world.base), 200)["settings"]
    assert settings["signUp"] == "open" and settings["mailFrom"] == "Acme <no-reply@acme.test>"
    email = new_email()
    expect_status(world.admin.client.post(f"/{world.name}/auth/signup", json={
        "email": email, "password": "a long password"}), 202)
    go(console, world, "mail")
    mail = console.get_by_test_id("mail")
    expect(mail).to_contain_text(email)
    mail.get_by_role("button", name=f"Confirm your email for {world.name}").click()
    expect(console.get_by_test_id("mail-body")).to_contain_text(
        f"/{world.name}/auth/pages/verify#token=")


def test_the_operator_sees_who_is_verified_and_revokes_a_users_session(
        console: Page, world: AppWorld) -> None:
    org = world.org("Northwind")
    user = world.user()
    world.member(org, user["uid"], [])
    caller = world.login(user, org)
    go(console, world, "people")
    sessions_button = console.get_by_role("button", name=f"Sessions of {user['email']}")
    users_row = console.get_by_role("row").filter(has=sessions_button)
    expect(users_row).to_contain_text("verified")
    expect(users_row).not_to_contain_text("not verified")
    sessions_button.click()
    sessions = console.get_by_test_id("sessions")
    expect(sessions.get_by_role("button", name="Revoke")).to_have_count(1)
    sessions.get_by_role("button", name="Revoke").click()
    confirm(console, "Revoke")
    expect(sessions).to_contain_text("No open sessions.")
    expect_status(world.admin.client.post(f"/{world.name}/auth/refresh",
                                          json={"refresh_token": caller.refresh_token}), 401)
