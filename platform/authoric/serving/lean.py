"""`LeanRoute`: a route FastAPI documents from its signature, but serves without its
dependency machinery.

FastAPI solves a route's dependencies and validates its parameters on every request, which
costs a table route more than planning it. The table routes need none of it: they take the
request and the path's strings, and parse everything else at their own typed edge. So the
handler calls the endpoint with the path parameters as they are. The endpoint must return a
`Response`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute


class LeanRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = self.endpoint

        async def handle(request: Request) -> Response:
            response: Response = await endpoint(request, **request.path_params)
            return response

        return handle
