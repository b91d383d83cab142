"""The admin client's generated interfaces (clients/typescript/src/admin.generated.ts) and the
platform OpenAPI document they come from: a maintainer who changes a route's body or answer
model and forgets `scripts/admin-types` is told here."""

from __future__ import annotations

from pathlib import Path

from authoric.app import platform_document
from authoric.openapi.admin_types import admin_typescript, object_type, ts_type

GENERATED = Path(__file__).resolve().parents[2] / "clients/typescript/src/admin.generated.ts"


def test_a_maintainer_finds_the_admin_clients_interfaces_as_the_platform_document_declares() -> None:
    assert GENERATED.read_text() == admin_typescript(platform_document()), (
        "admin.generated.ts has drifted from the platform document: run scripts/admin-types")


def test_the_generated_interfaces_carry_the_bodies_the_routes_take() -> None:
    generated = admin_typescript(platform_document())
    for name in ("NewTable", "TableChange", "NewColumn", "IndexSpec", "NewOrg", "NewUser",
                 "ImpersonationRequest", "PreviewRequest", "RoleBody", "ColumnTypes", "AppInfo",
                 "Org", "User", "Member", "Membership", "MemberSet"):
        assert f"export interface {name} {{" in generated, name


def test_the_generated_interfaces_carry_every_answer_under_the_name_the_console_imports() -> None:
    generated = admin_typescript(platform_document())
    for name in ("TableDef", "ColumnDef", "Operations", "IndexDef", "AppSettings", "Role",
                 "ApiKey", "NewApiKey", "Invitation", "MailItem", "UserSession", "AccessToken",
                 "PreviewSide", "Preview", "AuditEntry", "OperatorActor", "MemberActor",
                 "KeyActor", "TableList", "IndexList", "RoleList", "KeyList", "InvitationList",
                 "MailPage", "SessionList", "AuditPage"):
        assert f"export interface {name} {{" in generated, name
    assert "  actor: OperatorActor | MemberActor | KeyActor;\n" in generated
    assert "  error?: ErrorDetail;\n" in generated  # an index's, once its build failed
    assert "export type ColumnType = \"text\" | " in generated


def test_a_schema_becomes_the_typescript_a_client_writes() -> None:
    names = frozenset({"Spec"})
    assert ts_type({"type": "array", "items": {"type": "integer"}}, names) == "number[]"
    assert ts_type({"anyOf": [{"type": "string"}, {"type": "null"}]}, names) == "string | null"
    assert ts_type({"enum": ["btree", "search"]}, names) == '"btree" | "search"'
    assert ts_type({"$ref": "#/components/schemas/AppView"}, names) == "AppInfo"
    assert ts_type({"type": "object", "additionalProperties": {"type": "string"}}, names) == \
        "Record<string, string>"
    assert ts_type({}, names) == "unknown"
    assert object_type({"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string"}, "b": {"type": "boolean"}}}, names) == \
        "{\n  a: string;\n  b?: boolean;\n}"
