"""The operators of a filter (contract section 4) as TypedDicts, one per kind of value, for the
filter types `authoric typegen --lang py` writes: `{"amount": {"gte": "100"}}`."""

from __future__ import annotations

from typing import Any, TypedDict

TextOps = TypedDict("TextOps", {
    "eq": str | None, "ne": str | None, "in": list[str], "nin": list[str], "lt": str, "lte": str,
    "gt": str, "gte": str, "like": str, "search": str, "is_null": bool,
}, total=False)
NumberOps = TypedDict("NumberOps", {
    "eq": str | int | float | None, "ne": str | int | float | None, "in": list[str | int | float],
    "nin": list[str | int | float], "lt": str | int | float, "lte": str | int | float,
    "gt": str | int | float, "gte": str | int | float, "is_null": bool,
}, total=False)
IntOps = TypedDict("IntOps", {
    "eq": int | None, "ne": int | None, "in": list[int], "nin": list[int], "lt": int, "lte": int,
    "gt": int, "gte": int, "is_null": bool,
}, total=False)
class BoolOps(TypedDict, total=False):
    eq: bool | None
    ne: bool | None
    is_null: bool
JsonOps = TypedDict("JsonOps", {"eq": Any, "ne": Any, "in": list[Any], "nin": list[Any],
                                "is_null": bool}, total=False)
