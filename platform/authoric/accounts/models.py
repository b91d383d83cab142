"""The request models of the account routes (contract sections 3 and 3a), and the answer
that lists a user's sessions."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from authoric.catalog.apps import MAX_PASSWORD_BYTES

EMAIL_PATTERN = r"^\s*[^@\s]+@[^@\s]+\s*$"
# Characters are at most 4 bytes: the byte limit itself is judged by `check_password`.
Password = Annotated[str, Field(min_length=1, max_length=MAX_PASSWORD_BYTES)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SignUp(_Body):
    """`POST /{app}/auth/signup`."""

    email: str = Field(pattern=EMAIL_PATTERN, max_length=320)
    password: Password

    @property
    def normalized_email(self) -> str:
        return self.email.strip().lower()


class EmailAddress(_Body):
    """`POST /{app}/auth/verify/resend` and `POST /{app}/auth/password/forgot`."""

    email: str = Field(max_length=320)

    @property
    def normalized_email(self) -> str:
        return self.email.strip().lower()


class MailedToken(_Body):
    """`POST /{app}/auth/verify`."""

    token: str = Field(max_length=200)


class PasswordReset(_Body):
    """`POST /{app}/auth/password/reset`."""

    token: str = Field(max_length=200)
    password: Password


class PasswordChange(_Body):
    """`POST /{app}/auth/password` (bearer)."""

    current: str = Field(max_length=4 * MAX_PASSWORD_BYTES)
    password: Password


class SwitchOrg(_Body):
    """`POST /{app}/auth/switch` (bearer)."""

    org: str = Field(max_length=100)


class NewMemberOrg(_Body):
    """`POST /{app}/orgs` (bearer): an org the signed-in user creates and owns."""

    name: str = Field(pattern=r"\S", max_length=200)


class SessionView(BaseModel):
    """One of a user's sessions (a refresh-token family): when it began and was last used
    (RFC 3339), the browser or program that began it, and whether it is the caller's own."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str
    created_at: str = Field(alias="createdAt")
    last_used_at: str = Field(alias="lastUsedAt")
    user_agent: str | None = Field(alias="userAgent")
    current: bool


class SessionList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[SessionView]
