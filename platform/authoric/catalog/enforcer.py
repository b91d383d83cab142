"""The PyCasbin enforcer for one app's roles (model: `policies/model.conf`)."""

from __future__ import annotations

import casbin

from authoric.catalog.roles import RoleDef
from authoric.shipped import shipped_dir


def build_enforcer(roles: dict[str, RoleDef]) -> casbin.Enforcer:
    """An enforcer holding every (role, table, action) grant of the app."""
    enforcer = casbin.Enforcer(str(shipped_dir("policies") / "model.conf"))
    rules = [[name, table, action] for name, role in roles.items()
             for table, action in role.permission_pairs()]
    if rules:
        enforcer.add_policies(rules)
    return enforcer


def granting_roles(enforcer: casbin.Enforcer, roles: tuple[str, ...], table: str,
                   action: str) -> list[str]:
    """The principal's roles that grant `action` on `table`."""
    return [role for role in roles if enforcer.enforce(role, table, action)]
