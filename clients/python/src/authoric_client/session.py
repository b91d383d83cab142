"""The session: the token pair, and refreshing it once for every caller at a time.

Refresh tokens rotate, and presenting a spent one revokes its whole family (contract section
3), so two refreshes racing would sign the user out. Every refresh here goes through one lock,
and a caller that waited for it checks whether the token it held has been replaced meanwhile:
then it uses the new one instead of refreshing again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from authoric_client.errors import AuthoricError

REFRESH_AT = 0.9  # refresh once this share of the access token's lifetime has passed


@dataclass(frozen=True)
class Tokens:
    access_token: str
    refresh_token: str
    expires_in: float
    obtained_at: float  # on the client's clock

    def stale(self, now: float) -> bool:
        """In the last tenth of its life (by the client's clock), or past it."""
        return now >= self.obtained_at + REFRESH_AT * self.expires_in


Request = Callable[..., Awaitable[httpx.Response]]  # AsyncClient.request: bearer, refresh, retry


class Session:
    """The token pair; or, with `api_key`, an API key sent instead (section 3b: nothing to
    refresh)."""

    def __init__(self, http: httpx.AsyncClient, app_path: str, clock: Callable[[], float],
                 api_key: str | None = None, request: Request | None = None) -> None:
        self._http = http
        self.api_key = api_key
        self._request = request
        self._auth = f"{app_path}/auth"
        self._clock = clock
        self._lock = asyncio.Lock()
        self.tokens: Tokens | None = None
        self.refreshes = 0  # how many refreshes this session made (for tests and metrics)

    async def sign_in(self, email: str, password: str, org: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"email": email, "password": password}
        if org is not None:
            body["org"] = org
        async with self._lock:
            return self._keep(await self._post("token", body))

    async def accept_invitation(self, token: str, password: str | None = None) -> dict[str, Any]:
        """Accept an invitation with the token from its mail (section 3a): `password` creates
        the account, or proves an existing one (signed in as it, none is needed). The session
        is then the invited org's."""
        body: dict[str, Any] = {"token": token}
        if password is not None:
            body["password"] = password
        headers = {"Authorization": f"Bearer {self.tokens.access_token}"} if self.tokens else {}
        async with self._lock:
            return self._keep(await self._post("invitations/accept", body, headers))

    async def sign_out(self) -> None:
        async with self._lock:
            tokens, self.tokens = self.tokens, None
            if tokens is not None:
                await self._post("logout", {"refresh_token": tokens.refresh_token})

    # Accounts (contract section 3) ----------------------------------------------------------

    async def sign_up(self, email: str, password: str) -> dict[str, Any]:
        """Create an account (the app's `signUp` must be "open"): `{"status":
        "verification_sent"}` when the app requires verification (a mail is on its way), else
        the account is signed in and its token pair returned."""
        answer = await self._post("signup", {"email": email, "password": password})
        if "access_token" in answer:
            async with self._lock:
                self._keep(answer)
        return answer

    async def verify_email(self, token: str) -> None:
        """Redeem the token of a verify mail's link."""
        await self._post("verify", {"token": token})

    async def resend_verification(self, email: str) -> None:
        await self._post("verify/resend", {"email": email})

    async def request_password_reset(self, email: str) -> None:
        """A reset mail to `email` if it has an account (the answer is the same either way)."""
        await self._post("password/forgot", {"email": email})

    async def reset_password(self, token: str, password: str) -> None:
        """A new password, with the token of a reset mail's link; every session ends."""
        await self._post("password/reset", {"token": token, "password": password})

    async def change_password(self, current: str, password: str) -> None:
        """The signed-in user's new password: their other sessions end, this one stays."""
        await self._bearer("POST", "password", {"current": current, "password": password})

    async def me(self) -> dict[str, Any]:
        """The user, this session's org and roles, memberships and pending invitations."""
        me: dict[str, Any] = (await self._bearer("GET", "me")).json()
        return me

    async def sessions(self) -> list[dict[str, Any]]:
        """The user's sessions, one per sign-in (`current` marks this one)."""
        items: list[dict[str, Any]] = (await self._bearer("GET", "sessions")).json()["items"]
        return items

    async def end_session(self, session_id: str) -> None:
        await self._bearer("DELETE", f"sessions/{session_id}")

    async def switch_org(self, org: str) -> dict[str, Any]:
        """Sign in to another org of the user's (a new session; the previous one stays)."""
        pair = (await self._bearer("POST", "switch", {"org": org})).json()
        async with self._lock:
            return self._keep(pair)

    async def _bearer(self, method: str, route: str,
                      body: dict[str, Any] | None = None) -> httpx.Response:
        assert self._request is not None, "account calls need the client's request"
        kw: dict[str, Any] = {} if body is None else {"json": body}
        return await self._request(method, f"{self._auth}/{route}", **kw)

    def use(self, access_token: str, refresh_token: str, expires_in: float) -> None:
        """Adopt a token pair obtained elsewhere (say, by a login page)."""
        self.tokens = Tokens(access_token, refresh_token, expires_in, self._clock())

    async def access_token(self) -> str | None:
        """The access token to send now, refreshed first when it is in its last tenth."""
        if self.api_key is not None:
            return self.api_key
        tokens = self.tokens
        if tokens is not None and tokens.stale(self._clock()):
            await self.refresh(tokens.access_token)
        return self.tokens.access_token if self.tokens else None

    async def refresh(self, replacing: str | None = None) -> None:
        """Refresh the pair, unless the access token `replacing` (the one the caller found
        stale or refused) has been replaced by someone else's refresh meanwhile."""
        if self.api_key is not None:
            raise AuthoricError(401, "UNAUTHENTICATED", "the API key was refused")
        async with self._lock:
            tokens = self.tokens
            if tokens is None:
                raise AuthoricError(401, "UNAUTHENTICATED", "not signed in")
            if replacing is not None and tokens.access_token != replacing:
                return
            try:
                self._keep(await self._post("refresh", {"refresh_token": tokens.refresh_token}))
            except AuthoricError as exc:
                if exc.status == 401:  # the family is gone: nothing to refresh any more
                    self.tokens = None
                raise
            self.refreshes += 1

    async def _post(self, route: str, body: dict[str, Any],
                    headers: dict[str, str] | None = None) -> dict[str, Any]:
        response = await self._http.post(f"{self._auth}/{route}", json=body, headers=headers)
        if response.status_code >= 400:
            raise AuthoricError.from_response(response)
        return response.json() if response.content else {}

    def _keep(self, pair: dict[str, Any]) -> dict[str, Any]:
        self.tokens = Tokens(pair["access_token"], pair["refresh_token"], float(pair["expires_in"]),
                             self._clock())
        return pair
