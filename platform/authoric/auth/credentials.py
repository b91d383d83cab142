"""The request models of `/{app}/auth`: what a client sends to log in, refresh or log out."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Login(BaseModel):
    """`POST /{app}/auth/token`. `org` may be left out when the user has one membership."""

    model_config = ConfigDict(extra="forbid")

    email: str
    password: str
    org: str | None = None


class RefreshToken(BaseModel):
    """`POST /{app}/auth/refresh` and `POST /{app}/auth/logout`."""

    model_config = ConfigDict(extra="forbid")

    refresh_token: str
