"""Statements known by their shape: a request's values bound by name, and the key that says
which SQL they fill.

Building a SQLAlchemy statement and its cache key costs more than the rest of a request. So a
plan describes the statement it needs as a `Shaped`: a key holding everything that decides the
SQL text (the kind of statement, the table, the decision, the order, which columns are written),
the request's values by name (the row uid, the caller's org, the column values), and a way to
build the statement. The runner builds and compiles it once per key and catalog version; later
requests only fill the named slots.

The rule that keeps this exact: every value that may differ between two requests of one key is
bound with `named()`, and appears in `params` under that name. Everything else in the statement
is a constant of the key (the decision's row policy is cached per role set and the principal
attributes it names, so it is part of the decision's key). The runner checks, when it compiles,
that each named slot holds the value given in `params` and that no `B_` name lacks a value.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy.sql.elements import BindParameter

PREFIX = "B_"  # upper case: no column name can clash (names are lower case)


def named(name: str, value: Any, type_: Any) -> BindParameter[Any]:
    """`value` bound under `name` (a `B_` name), unique in its statement, so a statement that
    holds two such values (one branch per org, say) keeps both."""
    return bindparam(name, value, type_=type_, unique=True)


@dataclass(frozen=True)
class Shaped:
    """A statement by shape. `key` None: this statement has no shape key (a filter, a draft
    decision), so it is built every time and cached by SQLAlchemy's own key.

    `params` fill the statement's slots on each call; any other value it binds is a constant
    of its shape. A plan's statement must name every `B_` value it binds (`own_binds`); the
    feed's judge leaves them out on purpose: its shape key names the read classes, whose org
    and policy values are those constants."""

    key: Hashable | None
    params: dict[str, Any]
    build: Callable[[], Any]
    own_binds: bool = True
