"""Who is looking at the dashboard: the session cookie gives the token, the token the role, and every
page and action declares the role it needs, as the API's routes do (api/state.py). The CSRF check
guards every request that changes something (docs/dashboard.md, "Security")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import Depends, Request

from ..api.auth import Principal
from ..api.state import ApiState, Caller, api_state, require_access
from ..client import Client
from ..errors import NotAuthenticated, PermissionDenied
from ..store.tokens import Role
from .sessions import SESSION_COOKIE, Session, SessionStore

CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"


class LoginRequired(NotAuthenticated):
    """No live dashboard session: the browser is sent to the login page."""


@dataclass(frozen=True)
class Viewer:
    """The dashboard's caller: principal, session, and the client it acts through (its audit rows
    name the token, as through the API)."""

    principal: Principal
    session: Session
    client: Client
    state: ApiState

    def may(self, role: Role | str) -> bool:
        """Whether the token's role covers `role`: pages show an action only to those it would not refuse."""
        return self.principal.role.may(Role(role))

    @property
    def unscoped(self) -> bool:
        return self.principal.scope is None

    def caller(self) -> Caller:
        """The viewer as the API's routes see a caller: a page reuses a route's checks and documents."""
        return Caller(self.principal, self.client, self.state)


def sessions_of(request: Request) -> SessionStore:
    store: SessionStore = request.app.state.sessions
    return store


def current_viewer(request: Request) -> Viewer:
    found = getattr(request.state, "viewer", None)
    if isinstance(found, Viewer):
        return found
    session = sessions_of(request).find(request.cookies.get(SESSION_COOKIE))
    if session is None:
        raise LoginRequired("log in with a token")
    state = api_state(request)
    principal = state.authenticator.principal_of_token(session.token_id)
    viewer = Viewer(principal, session, state.client_for(principal), state)
    request.state.viewer = viewer
    return viewer


def same_origin(request: Request) -> bool:
    """A browser names the page that sent a request in Origin (or Referer); one from another site is refused."""
    sender = request.headers.get("origin") or request.headers.get("referer")
    if sender is None:
        return True  # not a browser's cross-site request: those always carry Origin on POST
    parts = urlsplit(sender)
    return f"{parts.scheme}://{parts.netloc}" == f"{request.url.scheme}://{request.url.netloc}"


async def check_csrf(request: Request, session: Session) -> None:
    """PermissionDenied unless the request carries the session's CSRF token and comes from this site."""
    offered = request.headers.get(CSRF_HEADER)
    if offered is None and request.headers.get("content-type", "").startswith(
            ("application/x-www-form-urlencoded", "multipart/form-data")):
        value = (await request.form()).get(CSRF_FIELD)
        offered = value if isinstance(value, str) else None
    if not session.csrf_matches(offered) or not same_origin(request):
        raise PermissionDenied("the form's CSRF token is missing or stale: reload the page and try again")


def page(role: Role) -> Callable[..., object]:
    """A dependency for a page or fragment: the Viewer if its token has `role` (or admin) and
    reaches the scope in the path, if any."""

    def dependency(request: Request) -> Viewer:
        viewer = current_viewer(request)
        require_access(viewer.principal, role, request)
        return viewer

    dependency.__name__ = f"page_{role.value}"
    return dependency


def action(role: Role) -> Callable[..., object]:
    """A dependency for a request that changes something: as `page`, and the CSRF check first."""
    check_role = page(role)

    async def dependency(request: Request) -> Viewer:
        viewer = current_viewer(request)
        await check_csrf(request, viewer.session)
        result = check_role(request)
        assert isinstance(result, Viewer)
        return result

    dependency.__name__ = f"action_{role.value}"
    return dependency


def unscoped_page(request: Request) -> None:
    """A router's dependency for dashboard areas that belong to no scope (catalog, archives, audit)."""
    current_viewer(request).principal.require_unscoped(f"{request.url.path}")


UNSCOPED_PAGES = [Depends(unscoped_page)]
# the dependencies of the dashboard's routes, one per route, as in the API
Look = Depends(page(Role.VIEWER))
Operate = Depends(action(Role.OPERATOR))
LegalAction = Depends(action(Role.LEGAL))
AdminAction = Depends(action(Role.ADMIN))
