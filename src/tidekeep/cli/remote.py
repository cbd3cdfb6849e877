"""The CLI's `--server` mode: commands go through a tidekeep HTTP API instead of opening the
workspace, so the operator's machine needs a token, not database credentials (docs/api.md, "The
CLI against a server").

`Remote.call` answers the JSON of a route or raises the typed error the server raised (its problem
document names the class: api/problems.py), so a remote command ends with the same one line and
exit code as the local one. httpx is imported only here, and this module only when --server is
given: `tidekeep --help` never pays for it (docs/cli.md, "Start-up time").
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from ..errors import ConfigError, InvalidInput, StoreUnavailable
from ..printable import printable
from .progress import progress_bar
from .server_options import ServerOptions

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 120.0  # a route's own work (a truncation deleting many files) may take a while
POLL_INTERVAL_S = 0.25
PAGE_LIMIT = 1000  # the API's largest page (api/paging.py MAX_LIMIT): fewest round trips


class ServerUnavailable(StoreUnavailable):
    """The server could not be reached, or answered something that is not the tidekeep API."""


def read_token(options: ServerOptions, environ: Mapping[str, str]) -> str | None:
    """The token: from --token-file (which must not be readable by others, as ssh refuses a
    private key others can read), else TIDEKEEP_TOKEN, else none (the server then answers 401)."""
    if options.token_file is not None:
        path = options.token_file
        try:
            mode = path.stat().st_mode
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"cannot read --token-file {str(path)!r}: {exc.strerror or exc}") from None
        if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(f"--token-file {str(path)!r} is readable by other users; "
                              f"run `chmod 600 {path}` (a token is a password)")
        if not text:
            raise ConfigError(f"--token-file {str(path)!r} is empty")
        return text
    token = environ.get("TIDEKEEP_TOKEN", "").strip()
    return token or None


class Remote:
    """One server, one token: the calls a remote command makes."""

    def __init__(self, options: ServerOptions, token: str | None) -> None:
        url = options.url.rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"invalid --server {url!r}: expected http://HOST:PORT or https://HOST")
        self.url = url
        headers = {"Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        # TLS verification stays on; a private CA is given as a bundle, never by turning it off
        self._http = httpx.Client(base_url=url, headers=headers, verify=options.ca_bundle or True,
                                  timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S))

    def close(self) -> None:
        self._http.close()

    def call(self, method: str, path: str, json: Any = None, params: Mapping[str, Any] | None = None) -> Any:
        """The JSON answer of `method path` (under /api/v1); a problem answer raises its typed error."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(method, f"/api/v1{path}", json=json, params=query)
        except httpx.TransportError as exc:
            raise ServerUnavailable(f"tidekeep server {self.url} unavailable: {_reason(exc)}") from None
        return self._answer(response)

    def items(self, path: str, params: Mapping[str, Any] | None = None, limit: int | None = None) -> list[Any]:
        """Every item of a paged list (following next_cursor), or the first `limit` of them."""
        if limit is not None and limit < 1:
            raise InvalidInput(f"invalid --limit {limit}: must be 1 or more")
        found: list[Any] = []
        for page in self._pages(path, dict(params or {}), limit):
            found.extend(page)
            if limit is not None and len(found) >= limit:
                return found[:limit]
        return found

    def result(self, answer: Any, label: str, show_progress: bool, unit: str = "records") -> Any:
        """`answer` itself, or when it says a job was started (202: {job, location}), that job's result."""
        if isinstance(answer, dict) and set(answer) >= {"job", "location"}:
            return self.job(answer, label, show_progress, unit)
        return answer

    def job(self, accepted: Mapping[str, Any], label: str, show_progress: bool, unit: str = "records") -> Any:
        """Wait for the job a 202 answer started, showing its progress as the local command shows
        its own (cli/progress.py); its result, or the typed error it failed with."""
        from ..api.problems import error_from_problem

        job_id = str(accepted["job"])
        with progress_bar(label, show_progress, unit) as update:
            while True:
                state = self.call("GET", f"/jobs/{job_id}")
                progress = state.get("progress") or {}
                if update is not None and progress.get("total"):
                    update(int(progress.get("done") or 0), int(progress["total"]))
                if state["state"] == "succeeded":
                    return state["result"]
                if state["state"] == "failed":
                    error = state.get("error") or {}
                    raise error_from_problem(error, int(error.get("status") or 500))
                time.sleep(POLL_INTERVAL_S)

    def _pages(self, path: str, params: dict[str, Any], limit: int | None) -> Iterator[list[Any]]:
        cursor: str | None = None
        while True:
            page_size = PAGE_LIMIT if limit is None else max(1, min(limit, PAGE_LIMIT))
            answer = self.call("GET", path, params={**params, "limit": page_size, "cursor": cursor})
            if isinstance(answer, list):  # a route that answers a plain list has no further pages
                yield answer
                return
            yield list(answer.get("items", []))
            cursor = answer.get("next_cursor")
            if not cursor:
                return

    def _answer(self, response: httpx.Response) -> Any:
        from ..api.problems import error_from_problem

        try:
            document = response.json()
        except ValueError:
            document = None
        if response.is_success:
            if document is None and response.content:
                raise ServerUnavailable(f"{self.url} answered HTTP {response.status_code} with something other "
                                        "than JSON: is it a tidekeep API server?")
            return document
        if isinstance(document, dict) and "error" in document:
            raise error_from_problem(document, response.status_code)
        # a proxy's or another program's error page: say so, not what it contained
        raise ServerUnavailable(f"{self.url} answered HTTP {response.status_code} without a tidekeep problem "
                                "document: is it a tidekeep API server?")


def _reason(exc: httpx.TransportError) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return printable(text)[:200]



