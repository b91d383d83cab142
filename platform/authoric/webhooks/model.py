"""The webhook routes' bodies and answers (contract section 8), declared in the platform's
OpenAPI document through the typed routes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Op = Literal["insert", "update", "delete"]
OPS: tuple[Op, ...] = ("insert", "update", "delete")
Url = Annotated[str, Field(min_length=1, max_length=2000)]
Tables = Annotated[list[Annotated[str, Field(min_length=1, max_length=63)]],
                   Field(min_length=1, max_length=64)]
Ops = Annotated[list[Op], Field(min_length=1, max_length=3)]
Expand = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]],
                   Field(max_length=16)]
Role = Annotated[str, Field(min_length=1, max_length=63)]
# Active or failing: delivering (failing: stopped until the operator resumes it). Paused: the
# operator stopped it; its cursor stays, and resuming goes on from there.
Status = Literal["active", "paused", "failing"]


class NewWebhook(BaseModel):
    """`POST /admin/apps/{app}/webhooks`."""

    model_config = ConfigDict(extra="forbid")

    url: Url
    tables: Tables
    ops: Ops = Field(default_factory=lambda: list(OPS))
    org: str | None = None
    role: Role | None = None
    expand: Expand = Field(default_factory=list)


class WebhookChange(BaseModel):
    """`PATCH .../webhooks/{uid}`: what it leaves out keeps its value."""

    model_config = ConfigDict(extra="forbid")

    url: Url | None = None
    tables: Tables | None = None
    ops: Ops | None = None
    role: Role | None = None
    expand: Expand | None = None
    status: Literal["active", "paused"] | None = None


class Replay(BaseModel):
    """`POST .../webhooks/{uid}/replay`: send again from this position (included)."""

    model_config = ConfigDict(extra="forbid")

    from_: Annotated[str, Field(alias="from", pattern=r"^[0-9]{1,19}$")]


class WebhookView(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    uid: str
    url: str
    tables: list[str]
    ops: list[Op]
    org: str | None
    role: str | None
    expand: list[str]
    status: Status
    position: str = Field(description="the last position delivered (or judged not visible)")
    attempt: int = Field(description="failed attempts in a row at the current position")
    failing_since: str | None = Field(alias="failingSince")
    next_attempt_at: str | None = Field(alias="nextAttemptAt")
    created_at: str = Field(alias="createdAt")


class WebhookWithSecret(WebhookView):
    """A webhook as created, or after its secret was rotated: the only answers with it."""

    secret: str


class WebhookList(BaseModel):
    items: list[WebhookView]


class Delivery(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    position: str
    attempt: int
    at: str
    status: int | None
    error: str | None
    duration_ms: float = Field(alias="durationMs")


class DeliveryList(BaseModel):
    items: list[Delivery]
    next: str | None


class TestSend(BaseModel):
    """What the receiver answered a test delivery."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    status: int | None
    error: str | None
    duration_ms: float = Field(alias="durationMs")
