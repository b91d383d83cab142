"""The admin audit's action names, read from the admin routes themselves: declaring a route is
all it takes for its changes to be recorded under a name of their own. No server."""

from __future__ import annotations

from fastapi.routing import APIRoute

from authoric.http import admin
from authoric.http.admin_audit import action_of

MUTATING = {"POST", "PUT", "PATCH", "DELETE"}


def mutating_routes() -> list[tuple[str, str, APIRoute]]:
    return [(method, route.path, route) for route in admin.router.routes
            if isinstance(route, APIRoute) for method in sorted(route.methods & MUTATING)]


def test_every_change_an_operator_makes_through_the_admin_api_is_recorded_under_its_own_name(
) -> None:
    verbs = {"POST": "create", "PATCH": "update", "PUT": "put", "DELETE": "delete"}
    actions = {(method, path): action_of(route) for method, path, route in mutating_routes()}
    assert len(actions) >= 16
    for (method, path), action in actions.items():
        thing, _, verb = action.partition(".")
        assert verb == verbs[method], (method, path, action)
        # the object is what the path's last collection holds (`orgs/{org}/members` → member)
        collections = [part for part in path.split("/") if part and not part.startswith("{")]
        assert collections[-1].startswith(thing), (method, path, action)
    assert len(set(actions.values())) == len(actions)
    assert actions[("PATCH", "/admin/apps/{app}/tables/{table}")] == "table.update"
    assert actions[("PUT", "/admin/apps/{app}/orgs/{org}/members/{user}")] == "member.put"


def test_a_route_whose_name_says_no_verb_and_object_is_recorded_as_an_admin_change() -> None:
    route = APIRoute("/admin/apps/{app}/rotate", lambda: None, methods=["POST"], name="rotate")
    assert action_of(route) == "admin.change"
    assert action_of(None) == "admin.change"
