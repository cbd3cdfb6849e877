"""Fixtures of the dashboard tests: a live `tidekeep serve` and a headless Chromium (tests/helpers/dashboard.py).

Without Chromium (/usr/bin/chromium from Debian's package, or $TIDEKEEP_TEST_CHROMIUM) the browser
tests skip, except in CI (CI=true or TIDEKEEP_TEST_REQUIRE_BROWSER=1), where they fail: .ci/run installs it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.api_server import LiveApi, live_api
from tests.helpers.dashboard import CHROMIUM, CHROMIUM_ARGS, Served, artifacts_dir, browser_required, served_dashboard

import tidekeep as tk
from tidekeep.web import dashboard_app


@pytest.fixture
def web(sqlite_client: tk.Client) -> Iterator[LiveApi]:
    """The API and the dashboard in this test process over the `sqlite_client` workspace (fast HTTP tests)."""
    with live_api(sqlite_client.workspace, app_factory=dashboard_app) as served:
        yield served


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One `tidekeep serve` per test process, shared by the browser tests (each uses its own names)."""
    with served_dashboard(tmp_path_factory.mktemp("dashboard-home")) as live:
        yield live


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        message = f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)"
        if browser_required():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Watch:
    """What a browser context did that a page must never do: ask anything of another server (every
    asset is vendored), break the Content-Security-Policy (an inline script or style, an eval), or
    throw a script error. Checked when the test ends."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.problems: list[str] = []

    def context(self, context: Any) -> Any:
        context.on("request", self._request)
        context.on("page", self.page)
        return context

    def page(self, page: Any) -> Any:
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"script error: {error}"))
        return page

    def _request(self, request: Any) -> None:
        if not (request.url.startswith(self.origin + "/") or request.url.startswith(("data:", "blob:"))):
            self.problems.append(f"request to another server: {request.url}")

    def _console(self, message: Any) -> None:
        # an action's 4xx answer is logged by the browser ("Failed to load resource") and by htmx
        # ("Response Status Error Code"); the page shows it, which the tests check
        if message.type == "error" and not message.text.startswith(("Failed to load resource",
                                                                     "Response Status Error Code")):
            self.problems.append(f"console error: {message.text}")

    def check(self) -> None:
        assert self.problems == [], "\n".join(self.problems)


@pytest.fixture
def watch(served: Served) -> Iterator[Watch]:
    """A Watch over the browser contexts of the test (the `login` fixture's among them)."""
    watching = Watch(served.url)
    yield watching
    watching.check()


@pytest.fixture
def login(browser: Any, served: Served, watch: Watch) -> Iterator[Callable[[str], Any]]:
    """`login(role)`: a new browser context logged in through the login form with that role's token;
    returns its page. Each context's cookies are its own; `watch` checks what they did."""
    contexts: list[Any] = []

    def logged_in(role: str) -> Any:
        context = watch.context(browser.new_context(base_url=served.url, viewport={"width": 1280, "height": 900}))
        context.set_default_timeout(20_000)
        contexts.append(context)
        page = context.new_page()
        page.goto("/login")
        page.fill("#token", served.tokens[role])
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/$"))
        return page

    yield logged_in
    for context in contexts:
        context.close()


@pytest.fixture
def shot(request: pytest.FixtureRequest) -> Callable[[Any, str], Path]:
    """`shot(page, name)`: a full-page screenshot in the artifacts folder, named after the test and `name`."""

    def take(page: Any, name: str) -> Path:
        test = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        path = artifacts_dir() / f"{test}--{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 0
        return path

    return take
