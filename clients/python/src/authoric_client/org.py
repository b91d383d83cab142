"""`client.org`: the signed-in member's org, run by its members (contract sections 3a, 3b):
members, invitations and API keys, each within the member's permissions and roles' grants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from authoric_client.aclient import AsyncClient


class _Part:
    def __init__(self, client: AsyncClient[Any], part: str) -> None:
        self._client = client
        self._path = f"/{client.app}/org/{part}"

    async def _json(self, method: str, suffix: str = "", **kw: Any) -> Any:
        response = await self._client.request(method, self._path + suffix, **kw)
        return response.json() if response.content else None


class AsyncMembers(_Part):
    async def list(self, *, limit: int | None = None, after: str | None = None) -> dict[str, Any]:
        """`{"items": [{"user", "email", "roles", "joinedAt"}], "next"}`."""
        params = {k: v for k, v in (("limit", limit), ("after", after)) if v is not None}
        page: dict[str, Any] = await self._json("GET", params=params)
        return page

    async def update(self, user: str, roles: Sequence[str]) -> dict[str, Any]:
        membership: dict[str, Any] = await self._json("PUT", f"/{user}", json={"roles": list(roles)})
        return membership

    async def remove(self, user: str) -> None:
        await self._json("DELETE", f"/{user}")


class AsyncInvitations(_Part):
    async def create(self, email: str, roles: Sequence[str]) -> dict[str, Any]:
        """Invites `email` (a mail with the link goes out); the same email again resends."""
        invitation: dict[str, Any] = await self._json("POST", json={"email": email,
                                                                     "roles": list(roles)})
        return invitation

    async def list(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (await self._json("GET"))["items"]
        return items

    async def revoke(self, uid: str) -> None:
        await self._json("DELETE", f"/{uid}")


class AsyncKeys(_Part):
    async def create(self, name: str, roles: Sequence[str],
                     expires_at: str | None = None) -> dict[str, Any]:
        """A new key; its `key` is shown this once."""
        body: dict[str, Any] = {"name": name, "roles": list(roles)}
        if expires_at is not None:
            body["expiresAt"] = expires_at
        key: dict[str, Any] = await self._json("POST", json=body)
        return key

    async def list(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (await self._json("GET"))["items"]
        return items

    async def revoke(self, uid: str) -> None:
        await self._json("DELETE", f"/{uid}")


class AsyncOrg:
    def __init__(self, client: AsyncClient[Any]) -> None:
        self.members = AsyncMembers(client, "members")
        self.invitations = AsyncInvitations(client, "invitations")
        self.keys = AsyncKeys(client, "keys")
