"""The dashboard's auth matrix, read from its routers (web/routes WEB_ROUTERS) so a new page or
action is covered the day it is added: each route declares exactly one role (Look, Operate,
LegalAction, AdminAction); only GET shows, and every other method is an action that needs the CSRF
token; no session is sent to the login; a too-weak role is refused (403) and a sufficient one never
is, nor does it get a server error; a scoped token is refused on the areas of no scope."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass

import httpx
import pytest
from fastapi.routing import APIRoute
from tests.helpers.api_server import ROLES, LiveApi, live_api

import tidekeep as tk
from tidekeep.web import dashboard_app
from tidekeep.web.routes import WEB_ROUTERS

ROLE_OF_DEPENDENCY = {"page_viewer": "viewer", "action_operator": "operator", "action_legal": "legal",
                      "action_admin": "admin"}
SESSION_PATHS = {"/login", "/logout"}  # the way in and out: no role before the login
PATH_VALUES = {"scope": "s", "stream": "a", "group": "g", "dataset": "d"}


@dataclass(frozen=True)
class WebRoute:
    method: str
    path: str
    role: str
    unscoped: bool

    def url(self, scope: str = "s") -> str:
        values = {**PATH_VALUES, "scope": scope}
        return re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values.get(m.group(1), "1"), self.path)


def web_routes() -> list[WebRoute]:
    found = []
    for router in WEB_ROUTERS:
        for route in router.routes:
            assert isinstance(route, APIRoute)
            if route.path in SESSION_PATHS:
                continue
            names = [getattr(d.call, "__name__", "") for d in route.dependant.dependencies]
            roles = [ROLE_OF_DEPENDENCY[n] for n in names if n in ROLE_OF_DEPENDENCY]
            assert len(roles) == 1, f"{route.path} must take exactly one of Look/Operate/LegalAction/AdminAction"
            for method in route.methods:
                is_action = roles[0] != "viewer"
                assert (method == "GET") != is_action or (method == "POST" and not is_action and _read_only(
                    route)), f"{method} {route.path}: GET shows (Look), every other method acts (CSRF)"
                found.append(WebRoute(method, route.path, roles[0], "unscoped_page" in names))
    return found


def _read_only(route: APIRoute) -> bool:
    """A POST that only computes (a validation or an impact preview of an edited form) may be Look;
    it is marked by its name, so the exception is deliberate."""
    return route.name.endswith(("_validate", "_preview", "_impact"))


@pytest.fixture
def web(client: tk.Client) -> Iterator[LiveApi]:
    """A live dashboard on SQLite and on PostgreSQL, with a little of everything, so every list
    page's queries run on both dialects over real rows."""
    client.create_stream("s/a")
    with client.stream("s/a").writer("w") as writer:
        writer.write_many([b"event"] * 10, ["k1", "k2"] * 5)
    client.stream("s/a").truncate(client.stream("s/a").tail_cut(), reason="matrix")
    client.catalog.add([{"feed": "F", "type": "Events", "create_time": 1}] * 3)
    client.holds.remove(client.holds.add("stream", "s/a", "released"))
    client.holds.add("records", 'feed = "F"', "kept")
    with live_api(client.workspace, app_factory=dashboard_app) as served:
        yield served


def session(web: LiveApi, role: str, scope: str | None = None) -> tuple[httpx.Client, str]:
    name = role if scope is None else f"{role}-{scope}"
    token = web.tokens.get(name) or web.token(name, role, scope)
    browser = httpx.Client(base_url=web.url, timeout=60, follow_redirects=False)
    assert browser.post("/login", data={"token": token}).status_code == 303
    found = re.search(r'name="csrf_token" value="([^"]+)"', browser.get("/").text)
    assert found is not None
    return browser, found.group(1)


def allowed(role: str, needed: str) -> bool:
    return needed == "viewer" or role == needed or role == "admin"


def test_every_route_declares_one_role_and_gets_only_shows() -> None:
    routes = web_routes()
    assert any(r.method == "GET" for r in routes)


def test_no_session_goes_to_the_login(web: LiveApi) -> None:
    with httpx.Client(base_url=web.url, timeout=60) as browser:
        for route in web_routes():
            answer = browser.request(route.method, route.url())
            assert answer.status_code == 303 and answer.headers["location"].startswith("/login"), \
                f"{route.method} {route.path}: {answer.status_code}"


def test_roles_and_csrf_on_every_route(web: LiveApi) -> None:
    sessions = {role: session(web, role) for role in ROLES}
    try:
        for route in web_routes():
            for role, (browser, csrf) in sessions.items():
                headers = {"X-CSRF-Token": csrf} if route.method != "GET" else {}
                answer = browser.request(route.method, route.url(), headers=headers)
                if allowed(role, route.role):
                    assert answer.status_code not in (401, 403) and answer.status_code < 500, \
                        f"{role} on {route.method} {route.path}: {answer.status_code} {answer.text[:300]}"
                else:
                    assert answer.status_code == 403, f"{role} on {route.method} {route.path}: {answer.status_code}"
                if route.role != "viewer" and allowed(role, route.role):
                    forged = browser.request(route.method, route.url(), headers={"X-CSRF-Token": "forged"})
                    assert forged.status_code == 403 and "CSRF" in forged.text, f"{route.method} {route.path}"
                    missing = browser.request(route.method, route.url())
                    assert missing.status_code == 403, f"{route.method} {route.path} without the CSRF token"
    finally:
        for browser, _ in sessions.values():
            browser.close()


def test_a_scoped_token_sees_its_scope_only(web: LiveApi) -> None:
    browser, csrf = session(web, "admin", scope="s")
    with closing(browser):
        for route in web_routes():
            headers = {"X-CSRF-Token": csrf} if route.method != "GET" else {}
            if route.unscoped:
                answer = browser.request(route.method, route.url(), headers=headers)
                assert answer.status_code == 403, f"scoped on {route.method} {route.path}: {answer.status_code}"
            elif "{scope}" in route.path:
                answer = browser.request(route.method, route.url(scope="other"), headers=headers)
                assert answer.status_code == 403, f"scoped on another scope: {route.method} {route.path}"
