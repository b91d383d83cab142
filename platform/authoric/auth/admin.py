"""The platform admin token: the one check every admin-only route makes."""

from __future__ import annotations

import hmac

from authoric.auth.principals import bearer


def is_admin_token(header: str | None, admin_token: str) -> bool:
    """Whether `Authorization` carries the admin token (401 when it carries no bearer token)."""
    return hmac.compare_digest(bearer(header).encode(), admin_token.encode())
