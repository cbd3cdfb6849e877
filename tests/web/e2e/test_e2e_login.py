"""Logging in and out in a real browser (headless Chromium from Debian, tests/helpers/dashboard.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.helpers.dashboard import Served, axe_violations, describe
from tests.web.conftest import Watch


def test_login_overview_and_logout(browser: Any, served: Served, shot: Callable[[Any, str], Any],
                                   watch: Watch) -> None:
    context = watch.context(browser.new_context(base_url=served.url))
    try:
        page = context.new_page()
        page.goto("/?from=test")
        assert "/login" in page.url
        shot(page, "login")
        assert axe_violations(page) == [], describe(axe_violations(page))
        page.fill("#token", "tk_1_not-a-real-secret")
        page.click("button[type=submit]")
        assert page.get_by_role("alert").inner_text().startswith("That token is not valid")
        page.fill("#token", served.tokens["viewer"])
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/\?from=test$"))
        cookies = context.cookies()
        assert [(c["name"], c["httpOnly"], c["sameSite"]) for c in cookies] == [("tidekeep_session", True, "Strict")]
        assert served.tokens["viewer"] not in str(cookies)
        page.get_by_role("button", name="Log out").click()
        page.wait_for_url(re.compile(r".*/login$"))
        page.goto("/")
        assert "/login" in page.url
    finally:
        context.close()
