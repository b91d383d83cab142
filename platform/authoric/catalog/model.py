"""Table definitions as owners write them, validated, with the contract's defaults filled in;
and the request models of the table routes (`TableDef` for a new table, `TableChange` for PATCH)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from authoric.catalog.names import Name, check_name
from authoric.catalog.types import (
    COLUMN_TYPES,
    REGISTRY,
    BadValue,
    column_type,
    parse_json,
    parse_text,
)
from authoric.errors import Conflict, ValidationFailed

OPERATIONS = ("list", "read", "create", "update", "delete")
MAX_OPTIONS, MAX_OPTION_LENGTH = 1000, 200


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
    # The allowed values of a `select` column (and only there).
    options: list[str] | None = None

    def parse_json(self, value: Any) -> Any:
        """The Python value of a JSON value for this column: its type's, within its options."""
        return self._within_options(parse_json(self.type, value))

    def parse_text(self, raw: str) -> Any:
        """The Python value of a textual value (query string, CSV cell) for this column."""
        return self._within_options(parse_text(self.type, raw))

    def bound_default(self) -> Any:
        """The default value as a bound parameter of raw SQL (`CAST(:p AS <pg_name>)`)."""
        return column_type(self.type).bind_value(self.parse_json(self.default))

    def _within_options(self, value: Any) -> Any:
        if self.options is not None and value is not None and value not in self.options:
            raise BadValue(f"expected one of the options: {', '.join(self.options[:20])}")
        return value

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
        self._check_options()
        if self.default is not None:
            try:
                self.parse_json(self.default)
            except BadValue as exc:
                raise ValidationFailed(
                    f"column {self.name!r}: default does not fit its type: {exc}",
                    {"column": self.name},
                ) from exc
        return self

    def _check_options(self) -> None:
        if column_type(self.type).takes_options != (self.options is not None):
            raise ValidationFailed(f"column {self.name!r}: `options` goes with type select, "
                                   "and only there", {"column": self.name})
        if self.options is None:
            return
        bad = [o for o in self.options if not isinstance(o, str) or not o.strip()
               or len(o) > MAX_OPTION_LENGTH or "\x00" in o]
        if not self.options or len(self.options) > MAX_OPTIONS or bad:
            raise ValidationFailed(
                f"column {self.name!r}: options are 1 to {MAX_OPTIONS} non-blank strings of at "
                f"most {MAX_OPTION_LENGTH} characters", {"column": self.name})
        if len(set(self.options)) != len(self.options):
            raise ValidationFailed(f"column {self.name!r}: an option is listed twice",
                                   {"column": self.name})


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
    # The column that names a row to people; None: the default (see `display`).
    display_column: str | None = Field(default=None, alias="displayColumn")

    def stored(self) -> dict[str, Any]:
        """The definition as kept in the catalog (an unset display column stays unset); a
        column shows `options` only when it has some (a `select`)."""
        doc = self.model_dump(by_alias=True)
        for column in doc["columns"]:
            if column["options"] is None:
                del column["options"]
        return doc

    def public(self) -> dict[str, Any]:
        """The definition as answered: the display column resolved to its default."""
        return {**self.stored(), "displayColumn": self.display}

    @property
    def display(self) -> str | None:
        """The chosen display column, else the first required, unique text column, else None."""
        if self.display_column is not None:
            return self.display_column
        return next((c.name for c in self.columns
                     if c.type == "text" and c.required and c.unique), None)

    def column(self, name: str) -> ColumnDef | None:
        return next((c for c in self.columns if c.name == name), None)


class ColumnAlter(BaseModel):
    """One entry of `alterColumns`: the column's name and what changes (left out: kept)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    type: ColumnTypeName | None = None
    required: bool | None = None
    default: Any = None
    unique: bool | None = None
    options: list[str] | None = None

    def changes(self, field: str) -> bool:
        return field in self.model_fields_set


class TableChange(BaseModel):
    """`PATCH /admin/apps/{app}/tables/{table}`: any of operations, addColumns, dropColumns,
    renameColumns, alterColumns, displayColumn. All of it applies in one transaction, or none."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    operations: OperationsChange | None = None
    add_columns: list[ColumnDef] = Field(default_factory=list, alias="addColumns")
    drop_columns: list[str] = Field(default_factory=list, alias="dropColumns")
    rename_columns: dict[str, str] = Field(default_factory=dict, alias="renameColumns")
    alter_columns: list[ColumnAlter] = Field(default_factory=list, alias="alterColumns")
    display_column: str | None = Field(default=None, alias="displayColumn")

    @property
    def changes_columns(self) -> bool:
        """Whether rows already delivered to streams have another shape afterwards."""
        return bool(self.add_columns or self.drop_columns or self.rename_columns
                    or self.alter_columns)
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
