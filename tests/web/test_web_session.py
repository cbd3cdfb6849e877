"""Logging in to the dashboard and the guards on every request: the session cookie's flags, the
token never stored in the browser, CSRF on every change, roles exactly as in the API, revocation
ending a session at once, and the security headers (docs/dashboard.md, "Security"). Real HTTP
against a live server (tests/helpers/api_server.py) with the dashboard mounted."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest
from tests.helpers.api_server import LiveApi, live_api
from tests.helpers.web_client import browser_of, logged_in

import tidekeep as tk
from tidekeep.api.server import ApiOptions
from tidekeep.cli.serve import api_server
from tidekeep.config import load_settings
from tidekeep.web import dashboard_app
from tidekeep.web.throttle import FAILURES_ALLOWED


def test_pages_need_a_session_and_send_to_login(web: LiveApi) -> None:
    with browser_of(web) as browser:
        answer = browser.get("/?sort=name")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/login?next=/%3Fsort%3Dname"
        # an htmx request is told where to go instead
        answer = browser.get("/", headers={"HX-Request": "true"})
        assert answer.status_code == 401 and answer.headers["HX-Redirect"].startswith("/login")


def test_login_sets_a_strict_httponly_session_cookie_not_the_token(web: LiveApi) -> None:
    token = web.token("ops", "operator")
    with browser_of(web) as browser:
        answer = browser.post("/login", data={"token": token, "next": "/holds"})
        assert answer.status_code == 303 and answer.headers["location"] == "/holds"
        cookie = answer.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert token not in cookie and token.split("_")[2] not in cookie
        page = browser.get("/")
        assert page.status_code == 200 and "ops" in page.text and token not in page.text


def test_a_bad_token_is_refused_with_one_line_and_no_cookie(web: LiveApi) -> None:
    with browser_of(web) as browser:
        for text in ("", "nonsense", "tk_1_wrongsecretwrongsecret", "tk_999_abc"):
            answer = browser.post("/login", data={"token": text})
            assert answer.status_code == 401
            assert "set-cookie" not in answer.headers
            assert "That token is not valid" in answer.text


def test_repeated_failed_logins_get_429_without_a_token_check(web: LiveApi) -> None:
    token = web.token("ops", "operator")
    with browser_of(web) as browser:
        for _ in range(FAILURES_ALLOWED):
            assert browser.post("/login", data={"token": "tk_1_wrong"}).status_code == 401
        refused = browser.post("/login", data={"token": token})  # even a good token, from this address
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
        assert "Too many failed logins" in refused.text and "set-cookie" not in refused.headers


def test_after_login_only_local_paths(web: LiveApi) -> None:
    token = web.token("v", "viewer")
    with browser_of(web) as browser:
        for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"):
            answer = browser.post("/login", data={"token": token, "next": target})
            assert answer.status_code == 303 and answer.headers["location"] == "/", target


def test_a_login_posted_from_another_site_is_refused(web: LiveApi) -> None:
    token = web.token("v", "viewer")
    with browser_of(web) as browser:
        answer = browser.post("/login", data={"token": token}, headers={"Origin": "https://evil.example"})
        assert answer.status_code == 403 and "set-cookie" not in answer.headers


def test_revoking_the_token_ends_its_sessions_at_once(web: LiveApi) -> None:
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        assert browser.get("/").status_code == 200
        web.token_store.revoke("viewer")
        answer = browser.get("/")
        assert answer.status_code == 303 and answer.headers["location"].startswith("/login")


def test_logout_needs_the_csrf_token_and_ends_the_session(web: LiveApi) -> None:
    browser, csrf = logged_in(web, "viewer")
    with closing(browser):
        assert browser.post("/logout", data={"csrf_token": "forged"}).status_code == 403
        assert browser.get("/").status_code == 200  # still logged in
        answer = browser.post("/logout", data={"csrf_token": csrf})
        assert answer.status_code == 303 and answer.headers["location"] == "/login"
        assert browser.get("/").status_code == 303


def test_pages_carry_the_security_headers_and_the_api_keeps_problem_documents(web: LiveApi) -> None:
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        page = browser.get("/")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
        assert "unsafe-inline" not in policy
        missing = browser.get("/no/such/page")
        assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
        # the API under the same server: its documents and its Bearer tokens, never the cookie
        api = browser.get("/api/v1/holds")
        assert api.status_code == 401 and api.headers["content-type"] == "application/problem+json"


def test_static_assets_are_served_from_the_package(web: LiveApi) -> None:
    with browser_of(web) as browser:
        for path in ("/static/vendor/htmx.min.js", "/static/vendor/chart.umd.min.js", "/static/app.js",
                     "/static/app.css"):
            answer = browser.get(path)
            assert answer.status_code == 200 and len(answer.content) > 500, path


def test_without_authentication_the_login_enters_as_the_anonymous_administrator(
        sqlite_client: tk.Client) -> None:
    with live_api(sqlite_client.workspace, auth=False, app_factory=dashboard_app) as web, browser_of(web) as browser:
        form = browser.get("/login")
        assert "Authentication is off" in form.text
        assert browser.post("/login", data={"next": "/"}).status_code == 303
        assert "anonymous" in browser.get("/").text


@pytest.mark.parametrize("dashboard", [True, False])
def test_the_dashboard_setting_decides_what_serve_mounts(sqlite_client: tk.Client, tmp_path: Path,
                                                         dashboard: bool) -> None:
    settings = load_settings(tmp_path, env={"TIDEKEEP_API_DASHBOARD": str(dashboard).lower()})
    server = api_server(settings, sqlite_client.workspace, ApiOptions("127.0.0.1", 0))
    # the dashboard's application keeps the sessions; the API's alone has none
    assert hasattr(server.app.state, "sessions") is dashboard
    assert server.app.state.api is server.state  # the API either way
    server.state.close()
