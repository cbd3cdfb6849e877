"""What every request works with: the open workspace, the tokens, the jobs, and a client per
caller (each token name its own audit actor), plus the FastAPI dependencies that give a route its
`Caller` after checking the role the route needs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Depends, Request

from ..client import Client
from ..store.house import Workspace
from ..store.tokens import Role, TokenStore
from .auth import Authenticator, Principal
from .jobs import JobRegistry
from .metrics import ApiMetrics


class ApiState:
    def __init__(self, workspace: Workspace, auth: bool = True) -> None:
        self.workspace = workspace
        self.tokens = TokenStore(workspace.db, workspace.audit)
        self.authenticator = Authenticator(self.tokens if auth else None)
        self.jobs = JobRegistry(workspace.clock)
        self.metrics = ApiMetrics.of(workspace)  # /metrics; its refresher runs with the server (app.py)
        self._clients: dict[str, Client] = {}
        self._lock = threading.Lock()

    def client_for(self, principal: Principal) -> Client:
        """A client on the shared workspace whose audit rows name the caller's token."""
        actor = principal.name if self.authenticator.enabled else self.workspace.audit.actor
        with self._lock:
            client = self._clients.get(actor)
            if client is None:
                client = self._clients[actor] = Client.over(self.workspace, actor)
            return client

    def close(self) -> None:
        self.metrics.refresher.stop()
        self.jobs.shutdown()


@dataclass(frozen=True)
class Caller:
    """The principal of a request and the client it acts through."""

    principal: Principal
    client: Client
    state: ApiState

    def client_tokens(self) -> TokenStore:
        """The token store, auditing as the caller (its client's audit log)."""
        return TokenStore(self.client.workspace.db, self.client.workspace.audit)

    def stream(self, scope: str, stream: str) -> str:
        """"scope/stream", after checking the token may reach the scope."""
        self.principal.require_scope(scope)
        return f"{scope}/{stream}"


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


def principal_of(request: Request) -> Principal:
    """The request's principal, authenticated once per request."""
    found = getattr(request.state, "principal", None)
    if isinstance(found, Principal):
        return found
    principal = api_state(request).authenticator.principal(request.headers.get("authorization"))
    request.state.principal = principal
    return principal


def unscoped_only(request: Request) -> None:
    """A router's dependency for what belongs to no scope (catalog, archives, tokens): a token
    limited to a scope is refused before anything of the request is read."""
    principal_of(request).require_unscoped(f"{request.method} {request.url.path}")


def require_access(principal: Principal, role: Role, request: Request) -> None:
    """PermissionDenied unless the principal has `role` (or admin) and reaches the scope in the
    request's path, if any; checked before the body is read, so a scoped token learns nothing of
    another scope (the API's routes and the dashboard's pages alike)."""
    principal.require(role)
    scope = request.path_params.get("scope")
    if scope is not None:
        principal.require_scope(scope)


def needs(role: Role) -> Callable[..., Caller]:
    """A dependency: the request's Caller if its token has `role` (or admin) and reaches the scope
    in the path, if any; 401/403 otherwise."""

    def dependency(request: Request) -> Caller:
        state = api_state(request)
        principal = principal_of(request)
        require_access(principal, role, request)
        return Caller(principal, state.client_for(principal), state)

    dependency.__name__ = f"needs_{role.value}"
    return dependency


# `APIRouter(dependencies=UNSCOPED)`: every route of the router refuses scoped tokens
UNSCOPED = [Depends(unscoped_only)]

# the four route classes of the auth matrix (docs/security.md)
Reader = Depends(needs(Role.VIEWER))
Operator = Depends(needs(Role.OPERATOR))
Legal = Depends(needs(Role.LEGAL))
Admin = Depends(needs(Role.ADMIN))
