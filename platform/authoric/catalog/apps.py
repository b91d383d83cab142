"""Apps: create, look up by name or uid, settings, delete; and the version every cache keys on.

Also the request models of the app routes (`NewApp`, `AppChange`) and the settings they carry.
"""

from __future__ import annotations

import re
import uuid
from email.utils import formataddr, parseaddr
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import delete, false, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.schema import CreateSchema, DropSchema
from uuid6 import uuid7

from authoric.catalog.names import Name, app_key, check_name
from authoric.catalog.schema import schema_name
from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.errors import Conflict, NotFound, ValidationFailed, invalid_body

# A web page's origin as the `Origin` header carries it: http(s)://host[:port], no path; or "*".
ORIGIN_PATTERN = (r"^(\*|[Hh][Tt][Tt][Pp][Ss]?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.~-]+)"
                  r"(:[0-9]{1,5})?)$")
MAX_ORIGINS = 100

# The relay listens on this channel (the payload: the app uid only), run as written.
NOTIFY_POLICY = "SELECT pg_notify('authoric_policy', $1)"


def _origin(value: str) -> str:
    port = re.search(r":([0-9]{1,5})$", value)
    if port and not 0 < int(port.group(1)) <= 65535:
        raise ValueError("port out of range")
    # Browsers send scheme and host in lower case; stored so, a comparison is exact.
    return value.lower()


def _origins(values: list[str]) -> list[str]:
    if "*" in values and len(values) > 1:
        raise ValueError('"*" allows every origin and stands alone')
    return list(dict.fromkeys(values))


Origin = Annotated[str, Field(pattern=ORIGIN_PATTERN, max_length=300), AfterValidator(_origin)]
Origins = Annotated[list[Origin], Field(max_length=MAX_ORIGINS), AfterValidator(_origins)]
AccessTokenTtl = Annotated[int, Field(ge=1, le=86_400 * 30)]
RefreshTokenTtl = Annotated[int, Field(ge=1, le=86_400 * 3650)]
# Hours a webhook may keep failing before it turns `failing` (contract section 8).
WebhookRetryHours = Annotated[float, Field(gt=0, le=24 * 365)]

# Accounts (contract section 3): who may sign up, verify, create orgs; where mail links go.
SignUp = Literal["closed", "open", "invite"]
EmailVerification = Literal["required", "off"]
OrgCreation = Literal["operator", "users"]
OwnerRoles = Annotated[list[Name], Field(max_length=100), AfterValidator(
    lambda roles: list(dict.fromkeys(roles)))]
MAX_PASSWORD_BYTES = 1024
PasswordMinLength = Annotated[int, Field(ge=1, le=MAX_PASSWORD_BYTES)]
TOKEN_PLACEHOLDER = "{token}"


def _link(value: str) -> str:
    if TOKEN_PLACEHOLDER not in value:
        raise ValueError(f"a link must hold {TOKEN_PLACEHOLDER}, where the mailed token goes")
    return value


Link = Annotated[str, Field(pattern=r"^[Hh][Tt][Tt][Pp][Ss]?://\S+$", max_length=2000),
                 AfterValidator(_link)]


class Links(BaseModel):
    """Where the links in mail point (`{token}` is replaced by the mailed token); an unset one
    points to the server's own page (`/{app}/auth/pages/...`)."""

    model_config = ConfigDict(extra="forbid")

    verify: Link | None = None
    reset: Link | None = None
    invite: Link | None = None


def _mailbox(value: str) -> str:
    name, address = parseaddr(value)
    if "@" not in address or any(c in value for c in "\r\n"):
        raise ValueError('expected an address such as "Acme <no-reply@acme.test>"')
    return formataddr((name, address)) if name else address


MailFrom = Annotated[str, Field(max_length=320), AfterValidator(_mailbox)]


class MailTemplate(BaseModel):
    """One mail's own wording. `${app}`, `${link}` and `${email}` are filled in; a part left
    out keeps the server's wording."""

    model_config = ConfigDict(extra="forbid")

    subject: str | None = Field(default=None, max_length=300, pattern=r"^[^\r\n]*$")
    text: str | None = Field(default=None, max_length=20_000)
    html: str | None = Field(default=None, max_length=50_000)


MailKind = Literal["verify", "reset", "taken", "invite"]
MailTemplates = Annotated[dict[MailKind, MailTemplate], Field(max_length=10)]


class AppSettings(BaseModel):
    """An app's settings as stored, with the contract's defaults."""

    # Answers carry every setting, defaults filled in: the document says they are all there.
    model_config = ConfigDict(extra="forbid", populate_by_name=True,
                              json_schema_serialization_defaults_required=True)

    access_token_ttl: AccessTokenTtl = Field(default=900, alias="accessTokenTtl")
    refresh_token_ttl: RefreshTokenTtl = Field(default=2_592_000, alias="refreshTokenTtl")
    allowed_origins: Origins = Field(default_factory=list, alias="allowedOrigins")
    sign_up: SignUp = Field(default="closed", alias="signUp")
    email_verification: EmailVerification = Field(default="required", alias="emailVerification")
    org_creation: OrgCreation = Field(default="operator", alias="orgCreation")
    org_owner_roles: OwnerRoles = Field(default_factory=list, alias="orgOwnerRoles")
    password_min_length: PasswordMinLength = Field(default=8, alias="passwordMinLength")
    links: Links = Field(default_factory=Links)
    mail_from: MailFrom | None = Field(default=None, alias="mailFrom")
    mail_templates: MailTemplates = Field(default_factory=dict, alias="mailTemplates")
    webhook_retry_hours: WebhookRetryHours = Field(default=72, alias="webhookRetryHours")


class SettingsChange(BaseModel):
    """The settings a PATCH changes; the ones it leaves out keep their value."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # Defaults are None only to tell "left out" apart; a null sent is refused like any non-value.
    access_token_ttl: AccessTokenTtl = Field(default=None, alias="accessTokenTtl")  # type: ignore[assignment]
    refresh_token_ttl: RefreshTokenTtl = Field(default=None, alias="refreshTokenTtl")  # type: ignore[assignment]
    allowed_origins: Origins = Field(default=None, alias="allowedOrigins")  # type: ignore[arg-type]
    sign_up: SignUp = Field(default=None, alias="signUp")  # type: ignore[arg-type]
    email_verification: EmailVerification = Field(default=None, alias="emailVerification")  # type: ignore[arg-type]
    org_creation: OrgCreation = Field(default=None, alias="orgCreation")  # type: ignore[arg-type]
    org_owner_roles: OwnerRoles = Field(default=None, alias="orgOwnerRoles")  # type: ignore[arg-type]
    password_min_length: PasswordMinLength = Field(default=None, alias="passwordMinLength")  # type: ignore[assignment]
    links: Links = Field(default=None)  # type: ignore[assignment]
    mail_from: MailFrom | None = Field(default=None, alias="mailFrom")
    mail_templates: MailTemplates = Field(default=None, alias="mailTemplates")  # type: ignore[arg-type]
    webhook_retry_hours: WebhookRetryHours = Field(default=None, alias="webhookRetryHours")  # type: ignore[assignment]


class AppChange(BaseModel):
    """`PATCH /admin/apps/{app}`: only settings may change."""

    model_config = ConfigDict(extra="forbid")

    settings: SettingsChange = Field(default_factory=SettingsChange)


class AppView(BaseModel):
    """An app as the admin routes answer it (documents the answer in the platform document)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    uid: str
    name: str
    created_at: str = Field(alias="createdAt")
    settings: AppSettings


class AppList(BaseModel):
    items: list[AppView]


class NewApp(BaseModel):
    """`POST /admin/apps`."""

    model_config = ConfigDict(extra="forbid")

    name: Name


def app_settings(raw: dict[str, Any]) -> AppSettings:
    return AppSettings.model_validate(raw)


def public_app(row: Any) -> dict[str, Any]:
    return {
        "uid": str(row["uid"]),
        "name": row["name"],
        "createdAt": rfc3339(row["created_at"]),
        "settings": app_settings(row["settings"]).model_dump(by_alias=True),
    }


def app_where(ref: str) -> Any:
    """The condition on `authoric.apps` for the app a URL names (its name or its uid); false
    for a reference no app can have."""
    key = app_key(ref)
    if key is None:
        return false()
    return t.apps.c.uid == key if isinstance(key, uuid.UUID) else t.apps.c.name == key


async def find_app(conn: AsyncConnection, ref: str) -> Any:
    """The app row named `ref` (its name or its uid), or 404."""
    row = (await conn.execute(select(t.apps).where(app_where(ref)))).mappings().first()
    if row is None:
        raise NotFound("no such app", {"app": ref})
    return row


async def bump_version(conn: AsyncConnection, app_uid: uuid.UUID) -> None:
    """Mark the app's roles, members or tables as changed (caches and streams re-decide)."""
    await conn.execute(update(t.apps).where(t.apps.c.uid == app_uid)
                       .values(version=t.apps.c.version + 1))
    await notify_policy(conn, app_uid)


async def notify_policy(conn: AsyncConnection, app_uid: uuid.UUID) -> None:
    """Tell every process, once this transaction commits, that the app's roles, members,
    keys or tables changed: streams on every replica re-judge from the next event."""
    await conn.exec_driver_sql(NOTIFY_POLICY, (str(app_uid),))


# App names that would shadow a platform path (`/admin`, `/console/`, `/docs`, `/openapi.json`).
RESERVED_APP_NAMES = frozenset({"admin", "console", "docs", "openapi", "redoc", "health"})


async def create_app(conn: AsyncConnection, new: NewApp) -> Any:
    name = check_name(new.name, "app")
    if name in RESERVED_APP_NAMES:
        raise ValidationFailed(f"app name {name!r} is reserved", {"name": name})
    uid = uuid7()
    try:
        async with conn.begin_nested():
            await conn.execute(t.apps.insert().values(
                uid=uid, name=name, settings=AppSettings().model_dump(by_alias=True)))
    except IntegrityError as exc:
        raise Conflict(f"an app named {name!r} exists", {"name": name}) from exc
    await conn.execute(CreateSchema(schema_name(uid)))
    return await find_app(conn, str(uid))


async def patch_app(conn: AsyncConnection, ref: str, change: AppChange) -> Any:
    app = await find_app(conn, ref)
    merged = {**app["settings"], **change.settings.model_dump(by_alias=True, exclude_unset=True)}
    try:
        settings = app_settings(merged)
    except ValidationError as exc:
        raise invalid_body(exc, "invalid settings") from exc
    await conn.execute(update(t.apps).where(t.apps.c.uid == app["uid"])
                       .values(settings=settings.model_dump(by_alias=True)))
    return await find_app(conn, str(app["uid"]))


async def delete_app(conn: AsyncConnection, ref: str) -> None:
    app = await find_app(conn, ref)
    await conn.execute(DropSchema(schema_name(app["uid"]), cascade=True, if_exists=True))
    await conn.execute(delete(t.changes).where(t.changes.c.app_uid == app["uid"]))
    await conn.execute(delete(t.apps).where(t.apps.c.uid == app["uid"]))
    await notify_policy(conn, app["uid"])


async def list_apps(conn: AsyncConnection) -> list[Any]:
    return list((await conn.execute(select(t.apps).order_by(t.apps.c.created_at))).mappings())

