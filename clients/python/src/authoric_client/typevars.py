"""`TypeVar` with a default (PEP 696), so `Client(url, app)` needs no type argument.

Type checkers read typing_extensions' (their stubs ship it); at run time the default is only
dropped, so typing_extensions need not be installed.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import TypeVar
else:
    def TypeVar(name: str, *constraints: Any, default: Any = None, **kw: Any) -> Any:
        return typing.TypeVar(name, *constraints, **kw)

__all__ = ["TypeVar"]
