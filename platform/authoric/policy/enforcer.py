"""The PyCasbin enforcer for one app's roles (model: `policies/model.conf`)."""

from __future__ import annotations

from pathlib import Path

import casbin

from authoric.policy.roles import RoleDef

MODEL_PATH = Path(__file__).resolve().parents[3] / "policies" / "model.conf"


def build_enforcer(roles: dict[str, RoleDef]) -> casbin.Enforcer:
    """An enforcer holding every (role, table, action) grant of the app."""
    enforcer = casbin.Enforcer(str(MODEL_PATH))
    rules = [[name, table, action] for name, role in roles.items() for table, action in role.grants()]
    if rules:
        enforcer.add_policies(rules)
    return enforcer


def granting_roles(enforcer: casbin.Enforcer, roles: tuple[str, ...], table: str,
                   action: str) -> list[str]:
    """The principal's roles that grant `action` on `table`."""
    return [role for role in roles if enforcer.enforce(role, table, action)]
