"""A live API server for tests: uvicorn on a loopback port of tests/helpers/ports.py, in a thread
of the test process, over a workspace the test opened; httpx clients carrying tokens of each role."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
from fastapi import FastAPI

from tidekeep.api.app import create_app
from tidekeep.api.server import ApiOptions, ApiServer
from tidekeep.api.state import ApiState
from tidekeep.errors import ConfigError
from tidekeep.store.house import Workspace
from tidekeep.store.tokens import TokenStore

from .ports import unused_port

ROLES = ("viewer", "operator", "legal", "admin")


@dataclass
class LiveApi:
    server: ApiServer
    url: str
    tokens: dict[str, str] = field(default_factory=dict)  # token name -> token text
    _clients: list[httpx.Client] = field(default_factory=list)

    @property
    def token_store(self) -> TokenStore:
        return self.server.state.tokens

    def token(self, name: str, role: str, scope: str | None = None) -> str:
        """A new token (named `name`) of `role`, limited to `scope` when given."""
        _, text = self.token_store.create(name, role, scope)
        self.tokens[name] = text
        return text

    def http(self, token: str | None = None) -> httpx.Client:
        """An httpx client of the server, sending `token` (None: no Authorization header)."""
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        client = httpx.Client(base_url=self.url, headers=headers, timeout=60)
        self._clients.append(client)
        return client

    def as_role(self, role: str, scope: str | None = None) -> httpx.Client:
        """A client with a fresh token of `role` (named after it, and the scope)."""
        name = role if scope is None else f"{role}-{scope}"
        return self.http(self.tokens.get(name) or self.token(name, role, scope))

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self.server.stop()


@contextmanager
def live_api(workspace: Workspace, auth: bool = True,
             app_factory: Callable[[ApiState], FastAPI] = create_app) -> Iterator[LiveApi]:
    """Serve the API (or, with `app_factory=dashboard_app`, the API and the dashboard) over
    `workspace` until the block ends. A port another process took between
    choosing and binding is given up for another (three attempts)."""
    last: Exception | None = None
    for _ in range(3):
        port = unused_port()
        server = ApiServer(workspace, ApiOptions("127.0.0.1", port, auth=auth), app_factory)
        try:
            server.start()
        except ConfigError as exc:
            last = exc
            continue
        api = LiveApi(server, f"http://127.0.0.1:{port}")
        try:
            yield api
        finally:
            api.close()
        return
    raise AssertionError(f"the API server did not start: {last}")
