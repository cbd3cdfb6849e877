"""Logging in and out: a token becomes a session cookie (web/sessions.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ...api.state import api_state
from ...errors import NotAuthenticated, PermissionDenied
from ...store.tokens import parse_token
from ..auth import check_csrf, current_viewer, same_origin, sessions_of
from ..render import render
from ..sessions import SESSION_COOKIE
from ..throttle import LoginThrottle

router = APIRouter()


def _local_target(target: str | None) -> str:
    """Where to go after logging in: a path of this server only (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str | None = None) -> Response:
    return render(request, "login.html", None, target=_local_target(next), failed=None,
                  auth=api_state(request).authenticator.enabled)


@router.post("/login", response_class=HTMLResponse)
def login(request: Request, token: Annotated[str, Form()] = "",
          next: Annotated[str, Form()] = "/") -> Response:
    if not same_origin(request):
        raise PermissionDenied("a login from another site is refused")
    state = api_state(request)
    token_id: int | None = None
    if state.authenticator.enabled:
        throttle: LoginThrottle = request.app.state.login_throttle
        address = request.client.host if request.client else "unknown"
        wait_ms = throttle.wait_ms(address)
        if wait_ms > 0:
            seconds = -(-wait_ms // 1000)
            refused = render(request, "login.html", None, status_code=429, target=_local_target(next), auth=True,
                             failed=f"Too many failed logins from this address: try again in {seconds} s.")
            refused.headers["Retry-After"] = str(seconds)
            return refused
        try:
            state.authenticator.principal("Bearer " + token.strip())
            token_id = parse_token(token.strip())[0]
        except NotAuthenticated:
            throttle.failed(address)
            return render(request, "login.html", None, status_code=401, target=_local_target(next),
                          failed="That token is not valid (unknown, revoked or mistyped).", auth=True)
        throttle.succeeded(address)
    session_id, _ = sessions_of(request).open(token_id)
    response = RedirectResponse(_local_target(next), status_code=303)
    response.set_cookie(SESSION_COOKIE, session_id, httponly=True, samesite="strict", path="/",
                        secure=request.url.scheme == "https")
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    viewer = current_viewer(request)
    await check_csrf(request, viewer.session)
    sessions_of(request).close(request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response
