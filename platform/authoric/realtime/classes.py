"""Read classes: subscribers that would see exactly the same thing share one re-read.

Two subscribers of a table are in the same class when they have the same org, the same
roles, the same `?expand=` paths, and the same values for the principal attributes the row
policies use: the table's, and those of every table its expand paths reach (an expanded row
is judged by its own table's policy).
"""

from __future__ import annotations

from collections.abc import Hashable

from authoric.catalog.snapshot import AppSnapshot
from authoric.plan.request import ExpandPaths
from authoric.policy.decision import policy_attributes
from authoric.policy.principal import Principal
from authoric.realtime.expansion import expanded_tables


def class_key(snapshot: AppSnapshot, table: str, principal: Principal,
              expand: ExpandPaths = ()) -> Hashable:
    attributes = principal.attributes()
    used: set[str] = set()
    for name in {table} | expanded_tables(snapshot, table, expand):
        used |= policy_attributes(snapshot, name)
    return (principal.org_uid, tuple(sorted(principal.roles)),
            tuple((name, attributes.get(name)) for name in sorted(used - {"org"})), expand)
