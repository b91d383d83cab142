"""The seam where a user's pending invitations enter `GET /{app}/auth/me` (contract 3, 3a).

Invitations are tenancy's (issue 40): this answers none until tenancy fills it with the
invitations pending for the user's verified email.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection


async def pending_invitations(conn: AsyncConnection, app_uid: uuid.UUID, email: str,
                              email_verified: bool) -> list[dict[str, Any]]:
    """`[{"uid", "org", "orgName", "roles", "expiresAt"}]` for `email`, once verified."""
    return []
