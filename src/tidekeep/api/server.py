"""Serving the API with uvicorn: where it listens, TLS, and the secure-by-default refusals
(docs/security.md): without authentication it listens on a loopback address only, and a TLS
setting needs both the certificate and the key, readable, before anything starts."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from ..config import Settings, parse_listen
from ..errors import ConfigError, NotFound
from ..store.house import Workspace
from .app import create_app
from .state import ApiState

log = logging.getLogger("tidekeep.api")


@dataclass(frozen=True)
class ApiOptions:
    host: str
    port: int
    auth: bool = True
    tls_cert: str | None = None
    tls_key: str | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls_cert else 'http'}://{host}:{self.port}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_options(settings: Settings, listen: str | None = None, auth: bool | None = None) -> ApiOptions:
    """The API's options from the settings (a flag's `listen`/`auth` first); ConfigError, nothing
    started, for a non-loopback address without authentication or a half or unreadable TLS pair."""
    host, port = parse_listen(listen if listen is not None else settings["api.listen"])
    use_auth = settings["api.auth"] if auth is None else auth
    if not use_auth and not is_loopback(host):
        raise ConfigError(f"refusing to serve the API on {host} without authentication: set api.auth true "
                          "(and create tokens with 'tidekeep token create') or listen on 127.0.0.1")
    cert, key = settings["api.tls_cert"], settings["api.tls_key"]
    if (cert is None) != (key is None):
        raise ConfigError("TLS needs both api.tls_cert and api.tls_key")
    for setting, path in (("api.tls_cert", cert), ("api.tls_key", key)):
        if path is not None and not Path(path).is_file():
            raise NotFound(f"{setting}: no such file {path!r}")
    return ApiOptions(host, port, use_auth, cert, key)


class _Uvicorn(uvicorn.Server):
    """uvicorn, except that SIGTERM and SIGINT end it with exit code 0, as they end `tidekeep
    serve` (uvicorn raises the signal again after its shutdown, so the process would die by it)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # in `tidekeep serve` the main thread owns the signals and stops this server
            return
        previous = {s: signal.signal(s, self._stop) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _stop(self, signum: int, _frame: Any) -> None:
        log.info("received %s: stopping the API", signal.Signals(signum).name)
        self.should_exit = True


class ApiServer:
    """uvicorn serving the API in a thread of this process (`tidekeep serve`), or in the
    foreground (`tidekeep api`)."""

    def __init__(self, workspace: Workspace, options: ApiOptions,
                 app_factory: Callable[[ApiState], FastAPI] = create_app) -> None:
        """`app_factory` builds the ASGI application: the API alone, or with the dashboard (tidekeep.web)."""
        self.options = options
        self.state = ApiState(workspace, auth=options.auth)
        self.app = app_factory(self.state)
        config = uvicorn.Config(self.app, host=options.host, port=options.port, log_config=None,
                                access_log=False, ssl_certfile=options.tls_cert, ssl_keyfile=options.tls_key,
                                server_header=False, timeout_graceful_shutdown=5)
        self.server = _Uvicorn(config)
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Serve in this thread until stopped (uvicorn handles SIGTERM and SIGINT in the main thread)."""
        log.info("API listening on %s (authentication %s)", self.options.url, "on" if self.options.auth else "off")
        try:
            self.server.run()
        finally:
            self.state.close()

    def start(self) -> None:
        """Serve in a background thread; returns once the socket is bound (or the start failed)."""
        self._thread = threading.Thread(target=self.run, name="api", daemon=True)
        self._thread.start()
        while not self.server.started and self._thread.is_alive():
            self._thread.join(0.02)
        if not self.server.started:
            raise ConfigError(f"the API could not listen on {self.options.url} (see the log above)")

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
