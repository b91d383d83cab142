"""Validation of the names owners give to apps, tables, columns and roles."""

from __future__ import annotations

import re
import uuid
from typing import Annotated

from pydantic import Field

from authoric.errors import ValidationFailed

NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,62}")
# A name as request models type it: the pattern is checked (and documented) at the edge;
# reserved words are refused by `check_name`, which services still call.
Name = Annotated[str, Field(pattern=f"^{NAME_PATTERN.pattern}$")]
# Words the contract gives a meaning in URLs, query strings or rows.
RESERVED = frozenset(
    {"uid", "order", "limit", "after", "filter", "lastEventId", "lasteventid", "subscribe",
     "import", "createdAt", "updatedAt", "created_at", "updated_at", "org_uid", "deleted_at",
     "expand", "count"}
)

# PostgreSQL's system columns: every table already has them, so no column may take one.
SYSTEM_COLUMNS = frozenset({"ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"})


def is_valid_name(name: object) -> bool:
    return isinstance(name, str) and NAME_PATTERN.fullmatch(name) is not None


def app_key(ref: str) -> uuid.UUID | str | None:
    """What a URL's `{app}` can name: an app's uid, a name an app could have, or None for
    neither. None means no such app without asking the database, so a byte PostgreSQL refuses
    in text (NUL) never reaches it and the answer is the same 404 as for an unknown name."""
    try:
        return uuid.UUID(ref)
    except ValueError:
        return ref if is_valid_name(ref) else None


def check_name(name: object, what: str) -> str:
    """Return `name` when it is a legal, unreserved identifier; else raise 422."""
    if not is_valid_name(name):
        raise ValidationFailed(
            f"{what} name must match ^[a-z][a-z0-9_]{{0,62}}$",
            {"field": what, "value": name if isinstance(name, str) else None},
        )
    assert isinstance(name, str)
    if name in RESERVED or (what == "column" and name in SYSTEM_COLUMNS):
        raise ValidationFailed(f"{what} name {name!r} is reserved", {"field": what, "value": name})
    return name
