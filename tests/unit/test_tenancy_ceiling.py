"""The grants ceiling (tenancy/ceiling.py), walked exhaustively over a small universe of
roles: every set of grants, every target's roles (or none), every requested set (or a
removal), for another member and for the actor itself."""

from __future__ import annotations

from itertools import chain, combinations

import pytest

from authoric.catalog.roles import RoleDef
from authoric.tenancy.ceiling import NOT_GRANTABLE, grantable, judge

UNIVERSE = ("owner", "admin", "clerk", "viewer")


def subsets(items: tuple[str, ...]) -> list[frozenset[str]]:
    return [frozenset(c) for c in chain.from_iterable(
        combinations(items, n) for n in range(len(items) + 1))]


SETS = subsets(UNIVERSE)


def allowed_by_the_contract(grants: frozenset[str], target: frozenset[str] | None,
                            requested: frozenset[str] | None, own: bool) -> bool:
    """Section 3a read literally, independently of the implementation."""
    if own:
        return False  # never changes their own roles
    if target is not None and not target <= grants:
        return False  # may change or remove only members all of whose roles are within it
    if requested is not None:
        given = requested - (target or frozenset())
        taken = (target or frozenset()) - requested
        if not (given <= grants and taken <= grants and requested <= grants):
            return False
    return True


@pytest.mark.parametrize("own", [False, True])
def test_every_combination_is_judged_as_the_contract_says(own: bool) -> None:
    for grants in SETS:
        for target in [None, *SETS]:
            for requested in [None, *SETS]:
                verdict = judge(grants, target=target, requested=requested, own=own)
                expected = allowed_by_the_contract(grants, target, requested, own)
                assert verdict.allowed is expected, (grants, target, requested, own)
                assert bool(verdict) is expected
                if not expected:
                    assert verdict.reason == NOT_GRANTABLE


def test_a_refusal_names_the_roles_beyond_the_ceiling() -> None:
    verdict = judge(frozenset({"clerk"}), target=frozenset({"owner"}), requested=frozenset({"admin"}))
    assert verdict.roles == ("admin", "owner")


def test_a_clerk_manager_cannot_remove_an_owner() -> None:
    assert not judge(frozenset({"clerk"}), target=frozenset({"owner"}))


def test_a_member_cannot_change_their_own_roles_even_within_their_grants() -> None:
    assert not judge(frozenset(UNIVERSE), target=frozenset({"clerk"}),
                     requested=frozenset({"viewer"}), own=True)


def test_an_invitation_within_the_grants_is_allowed_and_one_beyond_is_not() -> None:
    assert judge(frozenset({"clerk", "viewer"}), requested=frozenset({"clerk"}))
    assert not judge(frozenset({"clerk"}), requested=frozenset({"clerk", "admin"}))


def test_grants_are_the_union_over_the_actors_roles_and_unknown_roles_grant_nothing() -> None:
    defs = {"lead": RoleDef(grants=["clerk"]), "hr": RoleDef(grants=["viewer", "clerk"]),
            "plain": RoleDef()}
    assert grantable(["lead", "hr"], defs) == {"clerk", "viewer"}
    assert grantable(["plain", "gone"], defs) == frozenset()
    assert grantable([], defs) == frozenset()
