"""The answers of the admin routes for orgs, users and members, as the platform document
declares them (`responses=` of each route). Documentation only: a route answers what its
service builds, never filtered through these; tests/api/test_admin_answers.py reads real
answers and checks they fit, and scripts/admin-types turns them into the admin client's
interfaces."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OrgView(Answer):
    """An org: `POST .../orgs` answers it, `GET .../orgs` lists them."""

    uid: str
    name: str


class UserView(Answer):
    """A user (never the password): `POST .../users` answers it, `GET .../users` lists them,
    each with whether their email is verified."""

    uid: str
    email: str
    emailVerified: bool | None = None  # in lists only


class MemberSet(Answer):
    """`PUT .../orgs/{org}/members/{user}`: the membership as now stored."""

    org: str
    user: str
    roles: list[str]


class MemberView(Answer):
    """A member of an org, with the user's email and when they joined (RFC 3339)."""

    org: str
    user: str
    email: str
    roles: list[str]
    joinedAt: str  # the contract's name


class MembershipView(Answer):
    """One org a user belongs to, by name, and the user's roles there."""

    org: str
    orgName: str  # the contract's name
    roles: list[str]


class OrgList(Answer):
    items: list[OrgView]


class UserList(Answer):
    items: list[UserView]


class MemberPage(Answer):
    items: list[MemberView]
    next: str | None


class MembershipList(Answer):
    items: list[MembershipView]


def declared(status: int, model: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    """A route's `responses=`: its answer's schema under `status`."""
    return {status: {"model": model, "description": "success"}}
