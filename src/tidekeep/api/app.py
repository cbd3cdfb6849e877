"""The FastAPI application: routers under /api/v1, problem documents for every error, health."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from prometheus_client import generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..errors import TidekeepError
from .metrics import EXPOSITION_TYPE, RequestMetrics
from .models import PROBLEM_RESPONSES
from .problems import PROBLEM_TYPE, problem, problem_of
from .routes import ROUTERS
from .state import ApiState, Caller, Reader

PREFIX = "/api/v1"
log = logging.getLogger("tidekeep.api")


def _problem_response(document: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(document, status_code=document["status"], media_type=PROBLEM_TYPE, headers=headers)


def error_response(exc: TidekeepError) -> JSONResponse:
    """The problem document of a typed error (with `WWW-Authenticate` on 401)."""
    document = problem_of(exc)
    return _problem_response(document, {"WWW-Authenticate": "Bearer"} if document["status"] == 401 else None)


def validation_response(exc: RequestValidationError) -> JSONResponse:
    """A request the route's parameters refuse: 422, naming the first bad field."""
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
    return _problem_response(problem(422, "InvalidInput", f"bad {where}: {first.get('msg', 'invalid')}",
                                     errors=[{"loc": [str(p) for p in e.get("loc", ())], "msg": e.get("msg")}
                                             for e in exc.errors()]))


def http_error_response(exc: StarletteHTTPException) -> JSONResponse:
    """Starlette's own errors (no such route, method not allowed) as problem documents."""
    name = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
    return _problem_response(problem(exc.status_code, name, str(exc.detail)), getattr(exc, "headers", None))


def internal_error_response(request: Request, exc: Exception) -> JSONResponse:
    """A defect: logged with its traceback on the server, one line for the caller."""
    log.error("internal error in %s %s", request.method, request.url.path, exc_info=exc)
    return _problem_response(problem(500, "InternalError", f"internal error ({type(exc).__name__}); "
                                     "the server's log has the traceback"))


def create_app(state: ApiState) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        state.metrics.refresher.start()  # the store-wide figures of /metrics, read every api.metrics_interval
        try:
            yield
        finally:
            state.metrics.refresher.stop()

    app = FastAPI(title="tidekeep", version=__version__, lifespan=lifespan,
                  description="Retention for streams, archives and a catalog: the control plane's HTTP API "
                              "(docs/api.md). Every route but /healthz and the documents needs "
                              "`Authorization: Bearer <token>`.")
    app.state.api = state

    @app.exception_handler(TidekeepError)
    async def tidekeep_error(_request: Request, exc: TidekeepError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return http_error_response(exc)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        return internal_error_response(request, exc)

    @app.get("/healthz", tags=["service"], summary="Liveness: the process answers")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics", tags=["service"], summary="Prometheus metrics (text exposition format; viewer role)",
             response_class=Response, responses={200: {"content": {EXPOSITION_TYPE: {}}}})
    def metrics(call: Caller = Reader) -> Response:
        call.principal.require_unscoped("the metrics (they name the streams of every scope)")
        return Response(generate_latest(state.metrics.registry), media_type=EXPOSITION_TYPE)

    for router in ROUTERS:
        app.include_router(router, prefix=PREFIX, responses=PROBLEM_RESPONSES)
    # the histogram's route label: the template under the prefix (a router's route knows only its own part)
    # (by id: a route compares by value and is not hashable; the routers live as long as the process)
    templates = {id(route): PREFIX + route.path for router in ROUTERS for route in router.routes
                 if isinstance(route, APIRoute)}
    app.add_middleware(RequestMetrics, histogram=state.metrics.requests, templates=templates)
    return app
