"""The grants ceiling (section 3a), as a pure function: may this actor hand out, change or
take away these roles?

A member may invite with, assign or take away only roles in the union of their roles'
`grants`; may change or remove only members all of whose roles lie within it; and never
changes their own roles. The caller reads the facts (in the write's transaction, with the
memberships locked) and this decides on them, so the rule is one function that a unit test
can walk exhaustively.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from authoric.catalog.roles import RoleDef

NOT_GRANTABLE = "role_not_grantable"


@dataclass(frozen=True)
class Verdict:
    """Allowed, or refused with the reason (`role_not_grantable`) and what was out of reach."""

    allowed: bool
    reason: str | None = None
    roles: tuple[str, ...] = ()  # the roles beyond the ceiling, or the actor's own

    def __bool__(self) -> bool:
        return self.allowed


ALLOWED = Verdict(True)


def grantable(roles: Iterable[str], definitions: Mapping[str, RoleDef]) -> frozenset[str]:
    """The union of the `grants` of `roles` (a role that no longer exists grants nothing)."""
    return frozenset(g for r in roles if r in definitions for g in definitions[r].grants)


def judge(grants: frozenset[str], *, target: Iterable[str] | None = None,
          requested: Iterable[str] | None = None, own: bool = False) -> Verdict:
    """Whether an actor whose grants are `grants` may act on a holder of `target`'s roles
    (None: nobody yet, as for an invitation or a new key) giving it `requested` (None: a
    removal). `own`: the target is the actor itself, whose roles are never theirs to change."""
    if own:
        return Verdict(False, NOT_GRANTABLE, tuple(sorted(set(target or ()))))
    beyond = sorted((set(target or ()) | set(requested or ())) - grants)
    if beyond:
        return Verdict(False, NOT_GRANTABLE, tuple(beyond))
    return ALLOWED
