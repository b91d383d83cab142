"""Table definitions as owners write them, validated, with the contract's defaults filled in;
and the request models of the table routes (`TableDef` for a new table, `TableChange` for PATCH)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from authoric.catalog.names import Name, check_name
from authoric.catalog.types import COLUMN_TYPES, REGISTRY, BadValue, column_type, parse_json
from authoric.errors import Conflict, ValidationFailed

OPERATIONS = ("list", "read", "create", "update", "delete")


# The type is checked by `ColumnDef.checked` against the registry (so the error lists the
# allowed types); the schema documents the same list.
ColumnTypeName = Annotated[str, Field(json_schema_extra={"enum": list(COLUMN_TYPES)})]


class ColumnDef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    type: ColumnTypeName
    required: bool = False
    unique: bool = False
    default: Any = None
    references: str | None = None

    def checked(self) -> ColumnDef:
        check_name(self.name, "column")
        if self.type not in REGISTRY:
            raise ValidationFailed(
                f"column {self.name!r}: unknown type {self.type!r}",
                {"column": self.name, "allowed": list(REGISTRY)},
            )
        if column_type(self.type).is_reference != (self.references is not None):
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


class OperationsChange(BaseModel):
    """The operations a PATCH switches; the ones it leaves out keep their state."""

    model_config = ConfigDict(extra="forbid")

    list: bool | None = None
    read: bool | None = None
    create: bool | None = None
    update: bool | None = None
    delete: bool | None = None

    def applied_to(self, current: Operations) -> Operations:
        return current.model_copy(update=self.model_dump(exclude_none=True))


class TableDef(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: Name
    columns: list[ColumnDef] = Field(default_factory=list)
    operations: Operations = Field(default_factory=Operations)
    soft_delete: bool = Field(default=False, alias="softDelete")
    # Section 5: direct SQL writes are streamed too (changes/capture.py).
    capture_sql_writes: bool = Field(default=False, alias="captureSqlWrites")
    # The PostgreSQL table (`"schema"."table"`), filled in by the server; any value sent is
    # replaced.
    sql_name: str | None = Field(default=None, alias="sqlName")

    def public(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)

    def column(self, name: str) -> ColumnDef | None:
        return next((c for c in self.columns if c.name == name), None)


class TableChange(BaseModel):
    """`PATCH /admin/apps/{app}/tables/{table}`: any of operations, addColumns, dropColumns."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    operations: OperationsChange | None = None
    add_columns: list[ColumnDef] = Field(default_factory=list, alias="addColumns")
    drop_columns: list[str] = Field(default_factory=list, alias="dropColumns")
    capture_sql_writes: bool | None = Field(default=None, alias="captureSqlWrites")


def check_columns(columns: list[ColumnDef], existing: set[str]) -> None:
    """Each column is well formed and no name repeats, nor clashes with a reference's `_uid`.
    A name an existing column already holds is a 409 (taken); a repeat within `columns`, a 422."""
    seen = set(existing)
    for column in columns:
        column.checked()
        reference = column_type(column.type).is_reference
        for taken in (column.name, f"{column.name}_uid" if reference else None):
            if taken and taken in existing:
                raise Conflict(f"column name {taken!r} is taken", {"column": column.name})
            if taken and taken in seen:
                raise ValidationFailed(f"column {column.name!r} is defined twice",
                                       {"column": column.name})
        seen.add(column.name)
        if reference:
            seen.add(f"{column.name}_uid")
