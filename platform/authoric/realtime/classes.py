"""Read classes: subscribers that would see exactly the same thing share one re-read.

Two subscribers of a table are in the same class when they have the same org, the same
roles, and the same values for the principal attributes the table's row policies use.
"""

from __future__ import annotations

from collections.abc import Hashable

from authoric.catalog.snapshot import AppSnapshot
from authoric.policy.decision import policy_attributes
from authoric.policy.principal import Principal


def class_key(snapshot: AppSnapshot, table: str, principal: Principal) -> Hashable:
    attributes = principal.attributes()
    used = sorted(policy_attributes(snapshot, table) - {"org"})
    return (principal.org_uid, tuple(sorted(principal.roles)),
            tuple((name, attributes.get(name)) for name in used))
