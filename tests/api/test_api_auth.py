"""The auth matrix over every route of the API: no token -> 401; each role against each route
class -> 403 exactly where the role is too weak; a token limited to one scope -> 403 on another
scope's streams and on everything that belongs to no scope. Routes are read from the app itself,
so a new route is covered the day it is added (and one without a role check fails here)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from fastapi.routing import APIRoute
from tests.helpers.api_server import ROLES, LiveApi

import tidekeep as tk
from tidekeep.api.app import PREFIX
from tidekeep.api.routes import ROUTERS

ROLE_OF_DEPENDENCY = {f"needs_{role}": role for role in ROLES}
# tags whose routes belong to no scope: a scoped token is refused there whatever the path says
UNSCOPED_TAGS = {"catalog", "archives", "tokens"}


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    role: str
    tags: frozenset[str]

    def url(self, scope: str = "s") -> str:
        values = {"scope": scope, "stream": "a"}
        return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "1"), self.path)


def api_routes(_api: LiveApi) -> list[Route]:
    """Every route the app mounts under /api/v1 (routes/__init__.py ROUTERS)."""
    found = []
    for route in (r for router in ROUTERS for r in router.routes):
        assert isinstance(route, APIRoute)
        roles = [ROLE_OF_DEPENDENCY[d.call.__name__] for d in route.dependant.dependencies
                 if getattr(d.call, "__name__", "") in ROLE_OF_DEPENDENCY]
        assert len(roles) == 1, f"{route.path} must take exactly one of Reader/Operator/Legal/Admin, has {roles}"
        for method in route.methods:
            found.append(Route(method, PREFIX + route.path, roles[0], frozenset(str(t) for t in route.tags)))
    return found


def allowed(role: str, needed: str) -> bool:
    return needed == "viewer" or role == needed or role == "admin"


def test_every_route_class_against_every_role(sqlite_api: LiveApi, sqlite_client: tk.Client) -> None:
    sqlite_client.create_stream("s/a")
    routes = api_routes(sqlite_api)
    assert {r.role for r in routes} == set(ROLES), "each role guards some route"
    anonymous = sqlite_api.http()
    clients = {role: sqlite_api.as_role(role) for role in ROLES}
    for route in routes:
        response = anonymous.request(route.method, route.url(), json={})
        assert response.status_code == 401, f"{route.method} {route.path} without a token: {response.status_code}"
        assert response.headers["www-authenticate"] == "Bearer"
        for role, http in clients.items():
            if route.role != "viewer" and not allowed(role, route.role):
                response = http.request(route.method, route.url(), json={})
                assert response.status_code == 403, f"{role} on {route.method} {route.path}: {response.status_code}"
                assert response.json()["error"] == "PermissionDenied"


def test_a_sufficient_role_is_never_refused(sqlite_api: LiveApi, sqlite_client: tk.Client) -> None:
    """The other half: the role that a route needs gets past the check (whatever the route then
    says about the made-up arguments), and never a server error."""
    sqlite_client.create_stream("s/a")
    clients = {role: sqlite_api.as_role(role) for role in ROLES}
    for route in api_routes(sqlite_api):
        if route.method == "DELETE" and route.path.endswith("/tokens/{name}"):
            continue  # would revoke the token "1": none exists, but keep the matrix's tokens alive
        response = clients[route.role].request(route.method, route.url(), json={})
        assert response.status_code not in (401, 403), f"{route.role} on {route.method} {route.path}"
        assert response.status_code < 500, f"{route.method} {route.path}: {response.status_code} {response.text}"


@pytest.mark.parametrize("role", ["viewer", "admin"])
def test_a_scoped_token_is_refused_outside_its_scope(sqlite_api: LiveApi, sqlite_client: tk.Client,
                                                     role: str) -> None:
    sqlite_client.create_stream("other/a")
    scoped = sqlite_api.as_role(role, scope="mine")
    for route in api_routes(sqlite_api):
        if not allowed(role, route.role):
            continue
        if "{scope}" in route.path:
            response = scoped.request(route.method, route.url(scope="other"), json={})
            assert response.status_code == 403, f"scoped {role} on {route.method} {route.url('other')}"
        elif route.tags & UNSCOPED_TAGS:
            response = scoped.request(route.method, route.url(), json={})
            assert response.status_code == 403, f"scoped {role} on {route.method} {route.path}"


def test_the_documents_and_health_need_no_token(sqlite_api: LiveApi) -> None:
    anonymous = sqlite_api.http()
    assert anonymous.get("/healthz").json() == {"status": "ok"}
    schema = anonymous.get("/openapi.json").json()
    assert "/api/v1/scopes/{scope}/streams/{stream}" in schema["paths"]
    assert anonymous.get("/docs").status_code == 200


def test_changes_through_the_api_are_audited_as_the_token(api: LiveApi, client: tk.Client) -> None:
    admin = api.as_role("admin")
    assert admin.post("/api/v1/tokens", json={"name": "ci", "role": "viewer"}).status_code == 201
    assert admin.delete("/api/v1/tokens/ci").status_code == 200
    rows = client.audit("token:ci")
    assert [(r["action"], r["actor"]) for r in rows] == [("token_revoke", "admin"), ("token_create", "admin")]
