"""The platform routes' request models, in process: a body is parsed strictly into its model at
the edge, and what does not fit becomes the contract's error before any service runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from authoric.auth.credentials import Login, RefreshToken
from authoric.catalog.apps import AppChange, AppSettings, NewApp
from authoric.catalog.model import TableChange, TableDef
from authoric.catalog.roles import RoleDef
from authoric.errors import BadRequest, ValidationFailed
from authoric.http.bodies import parse_body, request_body_schema
from authoric.tenancy.models import Membership, NewOrg, NewUser

MODELS: list[type[BaseModel]] = [NewApp, AppChange, TableDef, TableChange, NewOrg, NewUser,
                                 Membership, RoleDef, Login, RefreshToken]


def _parse(model: type[BaseModel], body: Any) -> Any:
    return parse_body(json.dumps(body).encode(), model)


def _refused_fields(model: type[BaseModel], body: Any) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        _parse(model, body)
    assert caught.value.status == 422 and caught.value.code == "VALIDATION_FAILED"
    return [e["field"] for e in caught.value.details["errors"]]


# Good bodies ------------------------------------------------------------------------------

def test_a_table_definition_gets_the_contracts_defaults() -> None:
    table = _parse(TableDef, {"name": "invoices", "columns": [
        {"name": "vendor", "type": "reference", "references": "vendors"}]})
    assert table.public() == {
        "name": "invoices",
        "columns": [{"name": "vendor", "type": "reference", "required": False, "unique": False,
                     "default": None, "references": "vendors"}],
        "operations": {"list": True, "read": True, "create": True, "update": True, "delete": True},
        "softDelete": False, "captureSqlWrites": False, "sqlName": None,
        "displayColumn": None}


def test_a_table_change_keeps_the_operations_it_leaves_out() -> None:
    change = _parse(TableChange, {"operations": {"delete": False}, "dropColumns": ["x"]})
    current = TableDef(name="t").operations
    assert change.operations.applied_to(current).model_dump() == {
        "list": True, "read": True, "create": True, "update": True, "delete": False}
    assert change.drop_columns == ["x"] and change.add_columns == []


def test_a_settings_change_carries_only_the_settings_it_names() -> None:
    change = _parse(AppChange, {"settings": {"accessTokenTtl": 60}})
    assert change.settings.model_dump(by_alias=True, exclude_unset=True) == {"accessTokenTtl": 60}
    assert _parse(AppChange, {}).settings.model_dump(exclude_unset=True) == {}


def test_a_new_users_email_is_kept_trimmed_and_in_lower_case() -> None:
    assert _parse(NewUser, {"email": " Ada@Example.COM ", "password": "long enough"}
                  ).email == "ada@example.com"


def test_login_may_leave_out_the_org() -> None:
    assert _parse(Login, {"email": "a@b.io", "password": "x"}).org is None


# Bad bodies -------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "body", "field"), [
    (NewApp, {}, "name"),
    (NewApp, {"name": 5}, "name"),
    (NewApp, {"name": "Bad-Name"}, "name"),
    (NewApp, {"name": "ok", "owner": "me"}, "owner"),
    (AppChange, {"settings": {"accessTokenTtl": "900"}}, "settings.accessTokenTtl"),
    (AppChange, {"settings": {"accessTokenTtl": 0}}, "settings.accessTokenTtl"),
    (AppChange, {"settings": {"accessTokenTtl": None}}, "settings.accessTokenTtl"),
    (AppChange, {"settings": {"sessionColour": "blue"}}, "settings.sessionColour"),
    (AppChange, {"name": "renamed"}, "name"),
    (TableDef, {"name": "t", "softDelete": "sometimes"}, "softDelete"),
    (TableDef, {"name": "t", "operations": {"list": 1}}, "operations.list"),
    (TableDef, {"name": "t", "columns": "not a list"}, "columns"),
    (TableDef, {"name": "t", "columns": [{"name": "x"}]}, "columns.0.type"),
    (TableDef, {"name": "t", "columns": [{"name": "x", "type": "text", "colour": "red"}]},
     "columns.0.colour"),
    (TableChange, {"dropColumns": "body"}, "dropColumns"),
    (TableChange, {"rename": "other"}, "rename"),
    (TableChange, {"operations": {"archive": False}}, "operations.archive"),
    (NewOrg, {"name": "   "}, "name"),
    (NewOrg, {"name": ""}, "name"),
    (NewOrg, {"name": "x" * 201}, "name"),
    (NewUser, {"email": "not an email", "password": "long enough"}, "email"),
    (NewUser, {"email": "a@b.io", "password": "short"}, "password"),
    (NewUser, {"email": "a@b.io", "password": 12345678}, "password"),
    (NewUser, {"email": "a@b.io", "password": " " * 9}, "password"),
    (Membership, {}, "roles"),
    (Membership, {"roles": "writer"}, "roles"),
    (Membership, {"roles": [1]}, "roles.0"),
    (RoleDef, {"permissions": "invoices:read"}, "permissions"),
    (RoleDef, {"rowPolicies": {"invoices": "status = 'x'"}}, "rowPolicies.invoices"),
    (RoleDef, {"grants": "clerk"}, "grants"),
    (Login, {"email": 5, "password": "x"}, "email"),
    (Login, {"email": "a@b.io", "password": "x", "org": 7}, "org"),
    (Login, {"email": "a@b.io"}, "password"),
    (RefreshToken, {"refresh_token": 5}, "refresh_token"),
    (RefreshToken, {}, "refresh_token"),
])
def test_a_body_that_does_not_fit_is_422_naming_the_field(model: type[BaseModel], body: Any,
                                                          field: str) -> None:
    assert field in _refused_fields(model, body)


@pytest.mark.parametrize("model", MODELS)
def test_a_body_that_is_not_an_object_is_422(model: type[BaseModel]) -> None:
    for body in (["x"], "x", 5, None):
        with pytest.raises(ValidationFailed):
            _parse(model, body)


@pytest.mark.parametrize("raw", [b"", b"{not json", b'{"name": "x"', b"\xff\xfe"])
def test_bytes_that_are_not_json_are_400_never_a_crash(raw: bytes) -> None:
    for model in MODELS:
        with pytest.raises(BadRequest) as caught:
            parse_body(raw, model)
        assert caught.value.status == 400 and caught.value.code == "BAD_REQUEST"


@pytest.mark.parametrize("raw", [b"[" * 100_000 + b"]" * 100_000,
                                 b'{"permissions": [], "rowPolicies": {"t": ' + b'{"not": ' * 5000
                                 + b"{}" + b"}" * 5001])
def test_json_nested_past_the_parser_is_422_too_deep_like_any_depth_past_the_limit(
        raw: bytes) -> None:
    for model in MODELS:
        with pytest.raises(ValidationFailed) as caught:
            parse_body(raw, model)
        assert caught.value.details["reason"] == "too_deep"


# allowedOrigins ---------------------------------------------------------------------------

@pytest.mark.parametrize(("origins", "stored"), [
    ([], []),
    (["*"], ["*"]),
    (["https://app.example.com"], ["https://app.example.com"]),
    (["https://App.Example.com:8443", "http://localhost:5173"],
     ["https://app.example.com:8443", "http://localhost:5173"]),
    (["http://[::1]:3000"], ["http://[::1]:3000"]),
    (["https://a.io", "https://a.io"], ["https://a.io"]),
])
def test_allowed_origins_are_stored_as_browsers_send_them(origins: list[str],
                                                            stored: list[str]) -> None:
    change = _parse(AppChange, {"settings": {"allowedOrigins": origins}})
    assert change.settings.allowed_origins == stored
    assert AppSettings.model_validate({"allowedOrigins": origins}).allowed_origins == stored


@pytest.mark.parametrize("origins", [
    "https://a.io", ["https://a.io/"], ["https://a.io/path"], ["a.io"], ["https://"],
    ["https://a.io:99999"], ["https://a.io:0"], ["*", "https://a.io"], [5], ["https://a b.io"],
    ["https://a.io?x=1"], ["https://user@a.io"], ["https://" + "a" * 300], ["*"] * 2 + ["x"],
    ["https://a.io"] * 101,
])
def test_an_allowed_origin_that_is_not_scheme_host_port_or_a_lone_star_is_422(
        origins: Any) -> None:
    assert "settings.allowedOrigins" in " ".join(
        _refused_fields(AppChange, {"settings": {"allowedOrigins": origins}}))


def test_settings_stored_before_allowed_origins_existed_read_as_none_allowed() -> None:
    old = AppSettings.model_validate({"accessTokenTtl": 900, "refreshTokenTtl": 2592000})
    assert old.allowed_origins == []
    assert old.model_dump(by_alias=True)["allowedOrigins"] == []


# Documented schemas -------------------------------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
def test_each_request_schema_is_self_contained_and_forbids_unknown_fields(
        model: type[BaseModel]) -> None:
    schema = request_body_schema(model)
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text
    assert schema["type"] == "object" and schema["additionalProperties"] is False


def test_the_table_schema_lists_the_registrys_column_types() -> None:
    column = request_body_schema(TableDef)["properties"]["columns"]["items"]
    assert column["properties"]["type"]["enum"] == [
        "text", "integer", "numeric", "boolean", "timestamp", "date", "uuid", "json", "reference",
        "select"]
    assert column["properties"]["name"]["pattern"] == "^[a-z][a-z0-9_]{0,62}$"


def test_a_body_nested_past_the_cap_of_every_json_body_is_422_too_deep() -> None:
    policy: Any = {"title": "x"}
    for _ in range(40):
        policy = {"not": policy}
    with pytest.raises(ValidationFailed) as caught:
        _parse(RoleDef, {"permissions": [], "rowPolicies": {"later": policy}})
    assert caught.value.details["reason"] == "too_deep"
