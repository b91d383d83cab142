"""Role definitions: permissions, row policies and redaction, validated when they are saved."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from authoric.catalog.names import is_valid_name
from authoric.errors import ValidationFailed

ACTIONS = ("read_list", "read", "create", "update", "delete")
# Resources beside tables that a permission may name (section 3a): an org's members and
# invitations, and its API keys. The dot keeps them apart from every table name.
ORG_MEMBERS, ORG_KEYS = "org.members", "org.keys"
ORG_RESOURCES = (ORG_MEMBERS, ORG_KEYS)


class RoleDef(BaseModel):
    """A role as stored, and the body of `PUT /admin/apps/{app}/roles/{role}`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    permissions: list[str] = Field(default_factory=list)
    row_policies: dict[str, dict[str, Any]] = Field(default_factory=dict, alias="rowPolicies")
    redact: dict[str, list[str]] = Field(default_factory=dict)
    # The roles this role's holders may invite with, assign or take away (section 3a).
    grants: list[str] = Field(default_factory=list, max_length=100)

    def public(self, name: str) -> dict[str, Any]:
        return {"name": name, **self.model_dump(by_alias=True)}

    def permission_pairs(self) -> list[tuple[str, str]]:
        """(table, action) pairs, `*` standing for any."""
        return [tuple(p.split(":", 1)) for p in self.permissions]  # type: ignore[misc]


class RoleView(BaseModel):
    """A role as the admin routes answer it: its name and everything it holds."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    permissions: list[str]
    row_policies: dict[str, dict[str, Any]] = Field(alias="rowPolicies")
    redact: dict[str, list[str]]
    grants: list[str]


class RoleList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[RoleView]


def check_role(role: RoleDef) -> RoleDef:
    for permission in role.permissions:
        table, sep, action = permission.partition(":")
        resource_ok = table == "*" or table in ORG_RESOURCES or is_valid_name(table)
        if not sep or not resource_ok or action not in (*ACTIONS, "*"):
            raise ValidationFailed(
                f"permission {permission!r} is not {{table}}:{{action}}",
                {"permission": permission, "actions": [*ACTIONS, "*"]},
            )
    for table in (*role.row_policies, *role.redact):
        if not is_valid_name(table):
            raise ValidationFailed(f"{table!r} is not a table name", {"table": table})
    for granted in role.grants:
        if not is_valid_name(granted):
            raise ValidationFailed(f"grants: {granted!r} is not a role name", {"grants": granted})
    return role
