"""The request models of the org, user and membership routes, as the admin sends them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from authoric.auth.emails import Email

# A pattern matching anywhere: at least one character that is not white space.
NOT_BLANK = r"\S"


class NewOrg(BaseModel):
    """`POST /admin/apps/{app}/orgs`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NOT_BLANK, max_length=200)


class NewUser(BaseModel):
    """`POST /admin/apps/{app}/users`. The email is kept trimmed and in lower case."""

    model_config = ConfigDict(extra="forbid")

    email: Email
    password: str = Field(pattern=NOT_BLANK, min_length=8, max_length=1024)


class Membership(BaseModel):
    """`PUT /admin/apps/{app}/orgs/{org}/members/{user}`: the member's roles (replacing any)."""

    model_config = ConfigDict(extra="forbid")

    roles: list[str] = Field(max_length=100)
