"""Apps: create, look up by name or uid, settings, delete; and the version every cache keys on."""

from __future__ import annotations

import re
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy import delete, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric.catalog.names import check_name
from authoric.catalog.schema import schema_name
from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.errors import Conflict, NotFound, ValidationFailed, invalid_body

ORIGIN = re.compile(r"https?://[^/\s?#@]+/?")  # scheme://host[:port], as browsers send it


class AppSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    access_token_ttl: int = Field(default=900, ge=1, le=86_400 * 30, alias="accessTokenTtl")
    refresh_token_ttl: int = Field(default=2_592_000, ge=1, le=86_400 * 3650,
                                   alias="refreshTokenTtl")
    # Browser origins allowed cross-origin (http/cors.py); "*" allows any.
    allowed_origins: list[str] = Field(default_factory=list, max_length=100,
                                       alias="allowedOrigins")

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            if origin != "*" and not ORIGIN.fullmatch(origin):
                raise ValueError(f"{origin!r} is not an origin such as https://app.example.com")
        return [o.rstrip("/") for o in value]


def app_settings(raw: dict[str, Any]) -> AppSettings:
    return AppSettings.model_validate(raw)


def public_app(row: Any) -> dict[str, Any]:
    return {
        "uid": str(row["uid"]),
        "name": row["name"],
        "createdAt": rfc3339(row["created_at"]),
        "settings": app_settings(row["settings"]).model_dump(by_alias=True),
    }


def _as_uuid(ref: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(ref)
    except ValueError:
        return None


async def find_app(conn: AsyncConnection, ref: str) -> Any:
    """The app row named `ref` (its name or its uid), or 404."""
    uid = _as_uuid(ref)
    where = t.apps.c.uid == uid if uid is not None else t.apps.c.name == ref
    row = (await conn.execute(select(t.apps).where(where))).mappings().first()
    if row is None:
        raise NotFound("no such app", {"app": ref})
    return row


async def bump_version(conn: AsyncConnection, app_uid: uuid.UUID) -> None:
    """Mark the app's roles, members or tables as changed (caches and streams re-decide)."""
    await conn.execute(update(t.apps).where(t.apps.c.uid == app_uid)
                       .values(version=t.apps.c.version + 1))
    # Streams on every replica re-judge from the next event; payload is the app uid only.
    await conn.execute(text("SELECT pg_notify('authoric_policy', :app)"), {"app": str(app_uid)})


# App names that would shadow a platform path (`/admin`, `/console/`, `/docs`, `/openapi.json`).
RESERVED_APP_NAMES = frozenset({"admin", "console", "docs", "openapi", "redoc", "health"})


async def create_app(conn: AsyncConnection, name: Any) -> Any:
    check_name(name, "app")
    if name in RESERVED_APP_NAMES:
        raise ValidationFailed(f"app name {name!r} is reserved", {"name": name})
    uid = uuid7()
    try:
        async with conn.begin_nested():
            await conn.execute(t.apps.insert().values(
                uid=uid, name=name, settings=AppSettings().model_dump(by_alias=True)))
    except IntegrityError as exc:
        raise Conflict(f"an app named {name!r} exists", {"name": name}) from exc
    await conn.execute(text(f'CREATE SCHEMA "{schema_name(uid)}"'))
    return await find_app(conn, str(uid))


async def patch_app(conn: AsyncConnection, ref: str, body: dict[str, Any]) -> Any:
    app = await find_app(conn, ref)
    unknown = set(body) - {"settings"}
    if unknown or not isinstance(body.get("settings", {}), dict):
        raise ValidationFailed("only `settings` may be changed", {"fields": sorted(unknown)})
    merged = {**app["settings"], **body.get("settings", {})}
    try:
        settings = app_settings(merged)
    except ValidationError as exc:
        raise invalid_body(exc, "invalid settings") from exc
    await conn.execute(update(t.apps).where(t.apps.c.uid == app["uid"])
                       .values(settings=settings.model_dump(by_alias=True)))
    return await find_app(conn, str(app["uid"]))


async def delete_app(conn: AsyncConnection, ref: str) -> None:
    app = await find_app(conn, ref)
    await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema_name(app["uid"])}" CASCADE'))
    await conn.execute(delete(t.changes).where(t.changes.c.app_uid == app["uid"]))
    await conn.execute(delete(t.apps).where(t.apps.c.uid == app["uid"]))
    await conn.execute(text("SELECT pg_notify('authoric_policy', :app)"),
                       {"app": str(app["uid"])})


async def list_apps(conn: AsyncConnection) -> list[Any]:
    return list((await conn.execute(select(t.apps).order_by(t.apps.c.created_at))).mappings())

