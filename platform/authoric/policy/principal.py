"""Who is calling: an app user acting in one org, with roles looked up for this request."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Principal:
    app_uid: uuid.UUID
    user_uid: uuid.UUID | None  # None when the app itself acts (server-side SDK)
    org_uid: uuid.UUID
    email: str | None
    roles: tuple[str, ...]
    expires_at: float | None = None  # the access token's exp, for streams
    acting_as_app: bool = False  # the server-side SDK acting for the app in one org
    read_only: bool = False  # an impersonation token: every write is refused (plan.access)
    api_key: bool = False  # an API key (section 3b): `user_uid` is the key's uid, no email
    # The membership (or key) the token was issued for; None when no token names one. A
    # stream whose membership was given a new uid (a password reset) or removed ends.
    membership: uuid.UUID | None = None

    def attributes(self) -> dict[str, Any]:
        """The values row policies may name through `$principal`."""
        return {"uid": self.user_uid, "email": self.email, "org": self.org_uid}
