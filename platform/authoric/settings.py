"""Runtime configuration: one Settings object, read from the environment, passed down."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob the server has. Each field names the environment variable that sets it."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    database_url: str | None = Field(default=None, validation_alias="DATABASE_URL")
    data_dir: Path = Field(default=Path(".authoric"), validation_alias="AUTHORIC_DATA_DIR")
    admin_token: str | None = Field(default=None, validation_alias="AUTHORIC_ADMIN_TOKEN")
    jwt_secret: str | None = Field(default=None, validation_alias="AUTHORIC_JWT_SECRET")
    max_body_bytes: int = Field(default=1_048_576, validation_alias="AUTHORIC_MAX_BODY_BYTES")
    max_import_bytes: int = Field(
        default=1_073_741_824, validation_alias="AUTHORIC_MAX_IMPORT_BYTES"
    )
    db_pool_size: int = Field(default=10, validation_alias="AUTHORIC_DB_POOL_SIZE")
    statement_timeout_ms: int = Field(
        default=15_000, validation_alias="AUTHORIC_STATEMENT_TIMEOUT_MS"
    )
    token_rate_limit: int = Field(
        default=20,
        validation_alias=AliasChoices("AUTHORIC_TOKEN_RATE_LIMIT"),
        description="token/refresh attempts allowed per client address, per app, per window",
    )
    account_rate_limit: int = Field(
        default=10,
        validation_alias="AUTHORIC_LOGIN_ACCOUNT_LIMIT",
        description="login attempts allowed per account (email within an app) per window",
    )
    rate_window: int = Field(
        default=60, ge=1, validation_alias="AUTHORIC_RATE_LIMIT_WINDOW",
        description="length of the login throttle's fixed window, in seconds",
    )
    hidden_conflict_limit: int = Field(
        default=10, ge=1, validation_alias="AUTHORIC_HIDDEN_CONFLICT_LIMIT",
        description="writes one member may have refused per window because a unique value is "
                    "held by a row the member may not read; past it 429",
    )
    import_time_budget: float = Field(
        default=300.0, gt=0, validation_alias="AUTHORIC_IMPORT_TIME_BUDGET",
        description="seconds a CSV import may run; past it 503 and nothing is written",
    )
    trusted_proxies: str = Field(
        default="", validation_alias="AUTHORIC_TRUSTED_PROXIES",
        description="comma-separated proxy addresses or networks whose X-Forwarded-For is "
                    "believed; none by default",
    )
    test_clock_file: Path | None = Field(
        default=None, validation_alias="AUTHORIC_TEST_CLOCK_FILE",
        description="TESTS ONLY: a file holding seconds to add to the clock for token expiry",
    )
    sse_ping_interval: float = Field(
        default=25.0, gt=0, validation_alias="AUTHORIC_SSE_PING_INTERVAL",
        description="seconds between keep-alive comments on an idle subscribe stream",
    )
    sse_replay_limit: int = Field(default=1000, validation_alias="AUTHORIC_SSE_REPLAY_LIMIT")
    sse_queue_size: int = Field(default=1000, validation_alias="AUTHORIC_SSE_QUEUE_SIZE")
    sse_max_streams_per_user: int = Field(
        default=32, ge=1, validation_alias="AUTHORIC_SSE_MAX_STREAMS_PER_USER",
        description="open subscribe streams one user may hold in one app, across every "
                    "worker and replica (leases in PostgreSQL)",
    )
    sse_lease_ttl: float = Field(
        default=60.0, ge=1, validation_alias="AUTHORIC_SSE_LEASE_TTL",
        description="seconds a stream's lease lives unless renewed: how soon the slots of a "
                    "killed process are free again",
    )
    change_retention: int = Field(
        default=7 * 24 * 3600, validation_alias="AUTHORIC_CHANGE_RETENTION"
    )

    workers: int | None = Field(
        default=None, validation_alias="AUTHORIC_WORKERS",
        description="`authoric serve` processes; unset: one per core, at most 3")
    shutdown_grace: int = Field(
        default=8, validation_alias="AUTHORIC_SHUTDOWN_GRACE",
        description="seconds in-flight requests get to finish after SIGTERM")
    log_format: Literal["text", "json"] = Field(
        default="text", validation_alias="AUTHORIC_LOG_FORMAT")
    metrics_token: str | None = Field(
        default=None, validation_alias="AUTHORIC_METRICS_TOKEN",
        description="a bearer token for GET /metrics only (the admin token is always accepted)")

    def secret_file(self, name: str) -> Path:
        return self.data_dir / name
