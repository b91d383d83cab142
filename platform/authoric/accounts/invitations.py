"""The seam where a user's pending invitations enter `GET /{app}/auth/me` (contract 3, 3a).

Invitations are accounts.org_invitations': the ones pending for the user's email,
once the user has verified it (an unverified address proves nothing about who reads it).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.accounts.org_invitations import pending_for


async def pending_invitations(conn: AsyncConnection, app_uid: uuid.UUID, email: str,
                              email_verified: bool) -> list[dict[str, Any]]:
    """`[{"uid", "org", "orgName", "roles", "expiresAt"}]` for `email`, once verified."""
    if not email_verified:
        return []
    return await pending_for(conn, app_uid, email)
