"""The dashboard beside the API in one application: pages at `/`, assets at `/static`, the API
under `/api/v1` as before (docs/dashboard.md). Errors on a page become an HTML page (or, for an
htmx request, a fragment in the page's message area); errors under the API stay problem documents."""

from __future__ import annotations

import logging
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint

from ..api.app import (
    create_app,
    error_response,
    http_error_response,
    internal_error_response,
    validation_response,
)
from ..api.problems import status_of
from ..api.state import ApiState
from ..errors import InvalidInput, NotAuthenticated, NotFound, TidekeepError
from .auth import current_viewer
from .render import render
from .routes import WEB_ROUTERS
from .sessions import SessionStore
from .throttle import LoginThrottle

log = logging.getLogger("tidekeep.web")

# the API's own paths keep the API's error documents
_API_PATHS = ("/api/", "/metrics", "/openapi.json", "/docs", "/redoc", "/healthz")
# scripts and styles only from this server: no inline script, nothing from elsewhere
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")


class InternalDefect(TidekeepError):
    """A defect on a page (status 500): the page says so in one line; the log has the traceback."""


def _is_api(request: Request) -> bool:
    return request.url.path.startswith(_API_PATHS)


def _error_page(request: Request, exc: TidekeepError) -> Response:
    if isinstance(exc, NotAuthenticated):
        target = "/login?next=" + quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        if request.headers.get("hx-request") == "true":
            return Response(status_code=401, headers={"HX-Redirect": target})
        return RedirectResponse(target, status_code=303)
    try:
        viewer = current_viewer(request)
    except TidekeepError:
        viewer = None
    template = "fragments/error.html" if request.headers.get("hx-request") == "true" else "error.html"
    response = render(request, template, viewer, status_code=status_of(exc), error=type(exc).__name__,
                      message=str(exc))
    if template.startswith("fragments/"):
        # the message replaces the page's message area, whatever the form aimed at
        response.headers.update({"HX-Retarget": "#messages", "HX-Reswap": "innerHTML"})
    return response


class SecurityHeaders(BaseHTTPMiddleware):
    """Pages may not be framed, cached or given scripts from elsewhere."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        if not _is_api(request):
            response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            response.headers.setdefault("X-Frame-Options", "DENY")
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
            response.headers.setdefault("Referrer-Policy", "same-origin")
            if not request.url.path.startswith("/static/"):
                response.headers.setdefault("Cache-Control", "no-store")
        return response


def dashboard_app(state: ApiState) -> FastAPI:
    """The API's application with the dashboard added."""
    app = create_app(state)
    app.state.sessions = SessionStore(state.workspace.clock)
    app.state.login_throttle = LoginThrottle(state.workspace.clock)
    app.mount("/static", StaticFiles(packages=[("tidekeep.web", "static")]), name="static")
    for router in WEB_ROUTERS:
        app.include_router(router, include_in_schema=False)

    @app.exception_handler(TidekeepError)
    async def tidekeep_error(request: Request, exc: TidekeepError) -> Response:
        return error_response(exc) if _is_api(request) else _error_page(request, exc)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        if _is_api(request):
            return validation_response(exc)
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "form"))
        return _error_page(request, InvalidInput(f"bad {where or 'request'}: {first.get('msg', 'invalid')}"))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if _is_api(request) or exc.status_code != 404:
            return http_error_response(exc)
        return _error_page(request, NotFound(f"no page at {request.url.path}"))

    @app.exception_handler(Exception)
    async def defect(request: Request, exc: Exception) -> Response:
        response = internal_error_response(request, exc)  # logged with the traceback
        if _is_api(request):
            return response
        return _error_page(request, InternalDefect(f"internal error ({type(exc).__name__}); "
                                                   "the server's log has the traceback"))

    app.add_middleware(SecurityHeaders)
    return app
