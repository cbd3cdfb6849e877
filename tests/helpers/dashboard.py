"""The dashboard's end-to-end harness (docs/testing.md, "Browser tests"): a real `tidekeep serve`
subprocess with the API and the dashboard on a loopback port, tokens of every role, and Debian's
Chromium driven by Playwright (never a downloaded browser). Screenshots go to the artifacts folder;
axe-core, vendored from npm (tests/web/vendor), checks accessibility."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .ports import unused_port

REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "tests" / "web" / "vendor" / "axe.min.js"
CHROMIUM = os.environ.get("TIDEKEEP_TEST_CHROMIUM", "/usr/bin/chromium")
# Chromium as root on a machine with a closed network: no sandbox (Playwright's default), and none of the
# background connections that would fail at every start
CHROMIUM_ARGS = ["--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic"]
ROLES = ("viewer", "operator", "legal", "admin")
# archives expire an hour after their newest message, so the timeline has an expiry line; the tests'
# archives are younger, so the server's own collector deletes none of them while a test runs
ARCHIVE_RETENTION_MINUTES = 60
SERVE_SETTINGS = {"TIDEKEEP_ARCHIVE_OUTPUT_RETENTION_PERIOD": str(ARCHIVE_RETENTION_MINUTES)}


def artifacts_dir() -> Path:
    """Where screenshots go: $TIDEKEEP_TEST_ARTIFACTS, else test-artifacts/ in the checkout (ignored by git)."""
    folder = Path(os.environ.get("TIDEKEEP_TEST_ARTIFACTS", REPO / "test-artifacts")) / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def browser_required() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"} or bool(
        os.environ.get("TIDEKEEP_TEST_REQUIRE_BROWSER"))


def _environment(home: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    environment["TIDEKEEP_HOME"] = str(home)
    return environment


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tidekeep.cli.main", *args], capture_output=True, text=True,
                          env=_environment(home), timeout=120, check=False)


@dataclass
class Served:
    """A live `tidekeep serve`: its URL, workspace home and a token text per role."""

    url: str
    home: Path
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def api(self, role: str = "admin") -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.tokens[role]}"},
                            timeout=60)

    def call(self, method: str, path: str, role: str = "admin", **kwargs: Any) -> Any:
        """An API call that must succeed; its JSON body (None for 204)."""
        with self.api(role) as http:
            response = http.request(method, path, **kwargs)
        assert response.status_code < 300, f"{method} {path}: {response.status_code} {response.text}"
        return None if response.status_code == 204 or not response.content else response.json()


@contextmanager
def served_dashboard(home: Path) -> Iterator[Served]:
    """`tidekeep init`, a token per role, then `tidekeep serve` (retention cycles hourly, so nothing a
    test wrote is truncated behind its back; SERVE_SETTINGS) until the block ends."""
    done = cli(home, "init")
    assert done.returncode == 0, done.stderr
    tokens = {}
    for role in ROLES:
        done = cli(home, "token", "create", role, "--role", role)
        assert done.returncode == 0, done.stderr
        tokens[role] = done.stdout.strip()
    last = ""
    for _ in range(3):  # a port taken between choosing and binding: another one
        port = unused_port()
        log = home / f"serve-{port}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "tidekeep.cli.main", "serve", "--listen", f"127.0.0.1:{port}",
                 "--frequency", "1h", "--sweep-every", "1h", "--no-watermarks"],
                env={**_environment(home), **SERVE_SETTINGS}, stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        if _wait_healthy(url, process):
            served = Served(url, home, log, tokens)
            try:
                yield served
            finally:
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            return
        process.kill()
        process.wait()
        last = log.read_text(errors="replace")[-3000:]
    raise AssertionError(f"tidekeep serve did not start:\n{last}")


def _wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 90) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def axe_violations(page: Any, impacts: tuple[str, ...] = ("serious", "critical")) -> list[dict[str, Any]]:
    """axe-core's WCAG 2 A and AA violations of the page at `impacts`, as {id, impact, help, nodes}."""
    # evaluated through the DevTools protocol, which the page's Content-Security-Policy does not govern
    # (a <script> tag would be refused: the dashboard allows scripts from its own server only)
    page.evaluate(AXE.read_text() + "\n;undefined")
    found = page.evaluate("async () => (await axe.run(document, {runOnly: {type: 'tag', "
                          "values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})).violations")
    return [{"id": v["id"], "impact": v["impact"], "help": v["help"],
             "nodes": [n["target"] for n in v["nodes"]][:5]}
            for v in found if v["impact"] in impacts]


def describe(violations: list[dict[str, Any]]) -> str:
    return json.dumps(violations, indent=1)
