"""`execute`'s choices, in process: which requests run as one guarded statement on the request
path and which open a transaction, and that the gate answers before the request's shape. No
server, no database."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import MetaData

from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.model import TableDef
from authoric.catalog.roles import RoleDef
from authoric.catalog.schema import compile_table
from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import Forbidden, NotFound, TableLocked, UnsupportedMediaType
from authoric.plan.access import admit
from authoric.plan.request import Checked, Operation, TableRequest
from authoric.policy.principal import Principal
from authoric.records.pipeline import admitted, strategy

APP, ORG, USER = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)


def snapshot() -> AppSnapshot:
    tables = [
        {"name": "vendors", "columns": [{"name": "name", "type": "text"}], "softDelete": True},
        {"name": "notes", "columns": [{"name": "body", "type": "text"}],
         "operations": {"delete": False}},
        {"name": "bills", "columns": [{"name": "vendor", "type": "reference",
                                       "references": "vendors"}]},
    ]
    metadata = MetaData()
    compiled = {d["name"]: compile_table(APP, TableDef.model_validate(d), metadata)
                for d in tables}
    roles = {"clerk": RoleDef.model_validate({"permissions": ["vendors:*", "notes:*",
                                                              "bills:*"]}),
             "reader": RoleDef.model_validate({"permissions": ["notes:read"]})}
    return AppSnapshot(APP, "shop", 1, {}, compiled, roles, build_enforcer(roles))


def member(role: str = "clerk") -> Principal:
    return Principal(APP, USER, ORG, "ada@example.com", (role,))


def choice(table: str, operation: Operation, at_once: bool = True) -> str:
    request = TableRequest("shop", table, operation)
    return strategy(admit(snapshot(), member(), table, request.action), request, at_once)


@pytest.mark.parametrize("operation", ["read", "list", "create", "update", "delete"])
def test_a_single_row_request_on_a_plain_table_is_one_guarded_statement(
        operation: Operation) -> None:
    assert choice("notes" if operation != "delete" else "bills", operation) == "statement"


@pytest.mark.parametrize("operation", ["create", "update"])
def test_a_write_naming_a_reference_into_a_soft_delete_table_opens_a_transaction(
        operation: Operation) -> None:
    # The referenced row's liveness is checked first, in the same transaction as the write.
    assert choice("bills", operation) == "transaction"


def test_a_delete_on_a_soft_delete_table_opens_a_transaction_but_its_reads_do_not() -> None:
    assert choice("vendors", "delete") == "transaction"
    assert choice("vendors", "read") == "statement"
    assert choice("vendors", "create") == "statement"


@pytest.mark.parametrize("operation", ["update_where", "delete_where", "import", "export"])
def test_bulk_writes_imports_and_exports_always_open_a_transaction(operation: Operation) -> None:
    assert choice("bills", operation) == "transaction"


@pytest.mark.parametrize("operation", ["read", "list", "create"])
def test_a_caller_without_a_guarded_statement_always_works_in_a_transaction(
        operation: Operation) -> None:
    assert choice("notes", operation, at_once=False) == "transaction"


class Caller:
    """A caller as the pipeline sees one, on the in-process snapshot."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    def admit(self, table: str, action: str) -> object:
        return admit(snapshot(), self.principal, table, action)


def refused_media() -> Checked[None]:
    return Checked(None, UnsupportedMediaType("send the file as text/csv"))


@pytest.mark.parametrize("table, principal, error", [
    ("nope", member(), NotFound), ("notes", member(), TableLocked),
    ("bills", member("reader"), Forbidden),
])
def test_the_gate_answers_before_a_request_of_the_wrong_shape(
        table: str, principal: Principal, error: type[Exception]) -> None:
    bad_uid = Checked(uuid.UUID(int=0), NotFound("no such row"))
    request = TableRequest("shop", table, "delete", uid=bad_uid, media=refused_media())
    with pytest.raises(error):
        admitted(Caller(principal), request)  # type: ignore[arg-type]


def test_once_admitted_the_request_shape_is_answered() -> None:
    request = TableRequest("shop", "vendors", "import", media=refused_media())
    with pytest.raises(UnsupportedMediaType):
        admitted(Caller(member()), request)  # type: ignore[arg-type]


def test_every_operation_a_request_can_name_has_one_unit_in_the_pipelines_table() -> None:
    from typing import get_args

    from authoric.plan.request import GATE_ACTION, Operation
    from authoric.records.pipeline import OPERATIONS

    assert set(OPERATIONS) == set(get_args(Operation)) == set(GATE_ACTION)
