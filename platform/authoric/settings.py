"""Runtime configuration: one Settings object, read from the environment, passed down."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasGenerator, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob the server has. A field `x_y` is set by the environment variable
    `AUTHORIC_X_Y`; the few exceptions name theirs (`validation_alias`)."""

    # The variable is the field's alias (not an env_prefix), so a refused value is reported
    # under the name the operator set.
    model_config = SettingsConfigDict(
        alias_generator=AliasGenerator(validation_alias=lambda name: f"AUTHORIC_{name.upper()}"),
        extra="ignore", populate_by_name=True)

    database_url: str | None = Field(default=None, validation_alias="DATABASE_URL")
    data_dir: Path = Path(".authoric")
    admin_token: str | None = None
    jwt_secret: str | None = None
    max_body_bytes: int = 1_048_576
    max_import_bytes: int = 1_073_741_824
    db_pool_size: int = 10
    statement_timeout_ms: int = 15_000
    # token/refresh attempts allowed per client address, per app, per window
    token_rate_limit: int = 20
    # login attempts allowed per account (email within an app) per window
    account_rate_limit: int = Field(default=10, validation_alias="AUTHORIC_LOGIN_ACCOUNT_LIMIT")
    # sign-up, resend, forgot, verify and reset requests allowed per client address, per app,
    # per window; and per email address
    mail_rate_limit: int = Field(default=20, ge=1)
    mail_account_limit: int = Field(default=5, ge=1)
    # invitations a member may send per hour, per client address and per inviting user
    invitation_rate_limit: int = Field(default=300, ge=1)
    invitation_account_limit: int = Field(default=100, ge=1)
    # orgs users may create per hour, per client address and per creating user
    org_creation_rate_limit: int = Field(default=50, ge=1)
    org_creation_account_limit: int = Field(default=10, ge=1)
    # length of the login throttle's fixed window, in seconds
    rate_window: int = Field(default=60, ge=1, validation_alias="AUTHORIC_RATE_LIMIT_WINDOW")
    # writes one member may have refused per window because a unique value is held by a row
    # the member may not read; past it 429
    hidden_conflict_limit: int = Field(default=10, ge=1)
    # seconds a CSV import may run; past it 503 and nothing is written
    import_time_budget: float = Field(default=300.0, gt=0)
    # comma-separated proxy addresses or networks whose X-Forwarded-For is believed; none by
    # default
    trusted_proxies: str = ""
    # TESTS ONLY: a file holding seconds to add to the clock for token expiry
    test_clock_file: Path | None = None
    # TESTS ONLY: hash passwords with Argon2id at its minimum cost (auth/passwords.py)
    test_cheap_password_hashing: bool = False
    # seconds between keep-alive comments on an idle subscribe stream
    sse_ping_interval: float = Field(default=25.0, gt=0)
    sse_replay_limit: int = 1000
    sse_queue_size: int = 1000
    # open subscribe streams one user may hold in one app, across every worker and replica
    # (leases in PostgreSQL)
    sse_max_streams_per_user: int = Field(default=32, ge=1)
    # seconds a stream's lease lives unless renewed: how soon the slots of a killed process
    # are free again
    sse_lease_ttl: float = Field(default=60.0, ge=1)
    change_retention: int = 7 * 24 * 3600
    # milliseconds a committed change may wait to share a stamping pass (and every process's
    # fan-out pass) with the changes after it; unset: 5 after a write through the server,
    # and captured SQL writes are looked for every 20. More spends latency to save feed CPU.
    feed_gather_ms: float | None = Field(default=None, ge=1, le=1000)

    # where mail goes: smtp://user:pass@host:587 (STARTTLS when the server offers it) or
    # smtps://user:pass@host:465 (TLS from the start); unset: the app's mailbox
    # (GET /admin/apps/{app}/mail and the console's Mail page)
    smtp_url: str | None = None
    # seconds an SMTP connection, command or reply may take
    smtp_timeout: float = Field(default=20.0, gt=0)
    # the sender of mail for apps without `mailFrom`
    mail_from: str = "Authoric <no-reply@localhost>"
    # a temporarily failed mail is tried again after this many seconds, doubling each time
    # (capped at an hour), until `mail_max_attempts` tries
    mail_retry_base: float = Field(default=30.0, gt=0)
    mail_max_attempts: int = Field(default=12, ge=1)
    # seconds between the sender's looks at the outbox for mail committed by other processes
    mail_poll_interval: float = Field(default=2.0, gt=0)
    # the address people open the server at (https://auth.example.com): links in mail to the
    # server's own pages start with it, and `authoric serve` prints it. Unset: the address
    # each request was made to, which a client chooses with its Host header; set it wherever
    # the server is reachable by others.
    public_url: str | None = None

    # `authoric serve` processes; unset: one per core, at most 3
    workers: int | None = None
    # with several workers, a subscribe request is served by the worker its org falls to, so
    # one worker judges each change (serving/handoff.py); `off`: by whichever worker accepted it
    stream_routing: Literal["org", "off"] = "org"
    # set by `authoric serve` for its workers, not by operators: where they meet to hand
    # streams over
    stream_handoff_dir: Path | None = None
    # seconds in-flight requests get to finish after SIGTERM
    shutdown_grace: int = 8
    log_format: Literal["text", "json"] = "text"
    # a bearer token for GET /metrics only (the admin token is always accepted)
    metrics_token: str | None = None

    # webhooks (contract section 8): deliver to loopback, private, link-local and unspecified
    # addresses too (`true` only where the receivers are on a private network, or in tests)
    webhook_allow_private: bool = False
    # seconds: the backoff ceiling after a webhook's first failure, doubling up to the maximum
    webhook_retry_base: float = Field(default=5.0, gt=0)
    webhook_retry_max: float = Field(default=3600.0, gt=0)
    # Whether this process delivers webhooks (claims their leases). Off, it still serves the
    # webhook routes; the processes with it on deliver. All of them must agree on the rest.
    webhook_delivery: bool = True

    def secret_file(self, name: str) -> Path:
        return self.data_dir / name
