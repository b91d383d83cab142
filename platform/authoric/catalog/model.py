"""Table definitions as owners write them, validated, with the contract's defaults filled in."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from authoric.catalog.names import check_name
from authoric.catalog.types import COLUMN_TYPES, BadValue, parse_json
from authoric.errors import Conflict, ValidationFailed

OPERATIONS = ("list", "read", "create", "update", "delete")


class ColumnDef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    type: str
    required: bool = False
    unique: bool = False
    default: Any = None
    references: str | None = None

    def checked(self) -> ColumnDef:
        check_name(self.name, "column")
        if self.type not in COLUMN_TYPES:
            raise ValidationFailed(
                f"column {self.name!r}: unknown type {self.type!r}",
                {"column": self.name, "allowed": list(COLUMN_TYPES)},
            )
        if (self.type == "reference") != (self.references is not None):
            raise ValidationFailed(
                f"column {self.name!r}: `references` goes with type reference, and only there",
                {"column": self.name},
            )
        if self.default is not None:
            try:
                parse_json(self.type, self.default)
            except BadValue as exc:
                raise ValidationFailed(
                    f"column {self.name!r}: default does not fit its type: {exc}",
                    {"column": self.name},
                ) from exc
        return self


class Operations(BaseModel):
    model_config = ConfigDict(extra="forbid")

    list: bool = True
    read: bool = True
    create: bool = True
    update: bool = True
    delete: bool = True


class TableDef(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    columns: list[ColumnDef] = Field(default_factory=list)
    operations: Operations = Field(default_factory=Operations)
    soft_delete: bool = Field(default=False, alias="softDelete")

    def public(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)

    def column(self, name: str) -> ColumnDef | None:
        return next((c for c in self.columns if c.name == name), None)


def check_columns(columns: list[ColumnDef], existing: set[str]) -> None:
    """Each column is well formed and no name repeats, nor clashes with a reference's `_uid`.
    A name an existing column already holds is a 409 (taken); a repeat within `columns`, a 422."""
    seen = set(existing)
    for column in columns:
        column.checked()
        for taken in (column.name, f"{column.name}_uid" if column.type == "reference" else None):
            if taken and taken in existing:
                raise Conflict(f"column name {taken!r} is taken", {"column": column.name})
            if taken and taken in seen:
                raise ValidationFailed(f"column {column.name!r} is defined twice",
                                       {"column": column.name})
        seen.add(column.name)
        if column.type == "reference":
            seen.add(f"{column.name}_uid")
