"""Dashboard sessions over plain HTTP for the fast web tests: a cookie-keeping httpx client that
behaves as a same-site browser, logged in through the login form with a token of a role (and
scope), and the CSRF token its pages carry."""

from __future__ import annotations

import re

import httpx

from .api_server import LiveApi


def browser_of(web: LiveApi) -> httpx.Client:
    """A cookie-keeping client that behaves as a same-site browser (no Authorization header)."""
    return httpx.Client(base_url=web.url, timeout=30, follow_redirects=False)


def logged_in(web: LiveApi, role: str, scope: str | None = None,
              token: str | None = None) -> tuple[httpx.Client, str]:
    """A browser logged in with `token`, by default a token of `role` (limited to `scope`, if given;
    one token per role and scope), and the CSRF token of its pages (the caller closes it with `with`)."""
    name = role if scope is None else f"{role}-{scope}"
    token = token or web.tokens.get(name) or web.token(name, role, scope)
    browser = browser_of(web)
    answer = browser.post("/login", data={"token": token, "next": "/"})
    assert answer.status_code == 303, answer.text
    page = browser.get("/")
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    return browser, found.group(1)
