"""The mails' wording: plain text and HTML, carrying the app's name, and overridable per app
(`settings.mailTemplates`). Links come from `settings.links`, or else point to the server's
own pages (`/{app}/auth/pages/...`), with the token in the fragment, which browsers never send
to a server (so no access log keeps it)."""

from __future__ import annotations

import html
from string import Template
from typing import Any, Literal

from authoric.catalog.apps import TOKEN_PLACEHOLDER, AppSettings, app_settings
from authoric.mail.outbox import Mail

Kind = Literal["verify", "reset", "taken", "invite"]
PAGES: dict[str, str] = {"verify": "verify", "reset": "reset", "invite": "invite"}

# (subject, text, html) per kind; `${app}`, `${link}` and `${email}` are filled in.
WORDING: dict[str, tuple[str, str, str]] = {
    "verify": (
        "Confirm your email for ${app}",
        "Welcome to ${app}.\n\nConfirm your email address (${email}) by opening this link:\n"
        "${link}\n\nThe link works once, for 24 hours. If you did not sign up, ignore this mail.\n",
        "<p>Welcome to ${app}.</p><p>Confirm your email address (${email}):</p>"
        '<p><a href="${link}">Confirm my email</a></p>'
        "<p>The link works once, for 24 hours. If you did not sign up, ignore this mail.</p>"),
    "reset": (
        "Reset your ${app} password",
        "Someone asked to reset the password of ${email} on ${app}.\n\nChoose a new one here:\n"
        "${link}\n\nThe link works once, for an hour. If it was not you, ignore this mail: "
        "your password stays as it is.\n",
        "<p>Someone asked to reset the password of ${email} on ${app}.</p>"
        '<p><a href="${link}">Choose a new password</a></p>'
        "<p>The link works once, for an hour. If it was not you, ignore this mail: your "
        "password stays as it is.</p>"),
    "taken": (
        "Your ${app} account",
        "Someone tried to sign up to ${app} with ${email}, which already has an account.\n\n"
        "If it was you, sign in, or reset your password if you have forgotten it. If it was "
        "not you, ignore this mail.\n",
        "<p>Someone tried to sign up to ${app} with ${email}, which already has an account.</p>"
        "<p>If it was you, sign in, or reset your password if you have forgotten it. If it was "
        "not you, ignore this mail.</p>"),
    "invite": (
        "You are invited to ${app}",
        "You are invited to join ${org} on ${app} (${email}).\n\nAccept here:\n${link}\n\n"
        "The link works once, for 7 days.\n",
        "<p>You are invited to join ${org} on ${app} (${email}).</p>"
        '<p><a href="${link}">Accept the invitation</a></p><p>The link works once, for 7 days.</p>'),
}
DEFAULT_FROM = "no-reply@localhost"


def mail_link(app: Any, kind: Kind, token: str, base_url: str) -> str:
    """Where a mailed token's link points: the app's `settings.links[kind]`, or the server's
    own page for it."""
    settings = app_settings(app["settings"])
    configured = getattr(settings.links, kind, None)
    if configured:
        return str(configured).replace(TOKEN_PLACEHOLDER, token)
    return f"{base_url.rstrip('/')}/{app['name']}/auth/pages/{PAGES[kind]}#token={token}"


def compose_mail(app: Any, kind: Kind, to: str, link: str = "", default_from: str = DEFAULT_FROM,
                 **values: str) -> Mail:
    """The `kind` mail to `to`, in the app's wording where it has its own."""
    settings: AppSettings = app_settings(app["settings"])
    subject, text, markup = WORDING[kind]
    own = settings.mail_templates.get(kind)
    if own is not None:
        subject, text, markup = own.subject or subject, own.text or text, own.html or markup
    plain = {"app": app["name"], "link": link, "email": to, "org": "", **values}
    escaped = {key: html.escape(value) for key, value in plain.items()}
    return Mail(app_uid=app["uid"], mail_from=settings.mail_from or default_from, to=to,
                subject=_one_line(Template(subject).safe_substitute(plain)),
                text=Template(text).safe_substitute(plain),
                html=Template(markup).safe_substitute(escaped))


def _one_line(subject: str) -> str:
    """A subject on one line, whatever was substituted into it."""
    return " ".join(subject.split())[:300]
