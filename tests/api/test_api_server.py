"""`tidekeep api`, `tidekeep serve` and `tidekeep token` as an operator runs them: real processes,
real sockets. Secure by default: no listening beyond loopback without authentication, TLS only
with both files, a token shown once and stored only as an argon2id hash."""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from tests.helpers.cli import run_cli
from tests.helpers.cli_runner import InProcess, assert_one_error_line
from tests.helpers.ports import unused_port

import tidekeep as tk
from tidekeep.store.schema_tokens import api_tokens
from tidekeep.store.tokens import parse_token


@pytest.fixture
def home(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    tk.connect(home=workspace, create=True).close()
    return workspace


def cli_env(home: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    environment["TIDEKEEP_HOME"] = str(home)
    return environment


def wait_until_up(process: subprocess.Popen[str], url: str, verify: str | bool = True) -> None:
    for _ in range(300):
        if process.poll() is not None:
            stderr = process.stderr.read() if process.stderr else ""
            raise AssertionError(f"the server exited {process.returncode}: {stderr}")
        try:
            if httpx.get(f"{url}/healthz", verify=verify, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not come up")


@contextlib.contextmanager
def running(home: Path, *args: str, url_scheme: str = "http", verify: str | bool = True,
            env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`tidekeep ARGS --listen 127.0.0.1:<port>` until the block ends; stopped with SIGTERM."""
    port = unused_port()
    process = subprocess.Popen([sys.executable, "-m", "tidekeep.cli.main", *args, "--listen", f"127.0.0.1:{port}"],
                               env={**cli_env(home), **(env or {})}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    url = f"{url_scheme}://127.0.0.1:{port}"
    try:
        wait_until_up(process, url, verify)
        yield process, url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_tidekeep_api_serves_and_stops_cleanly_on_sigterm(home: Path) -> None:
    token = run_cli(home, "token", "create", "ops", "--role", "operator").stdout.strip()
    with running(home, "api") as (process, url):
        assert httpx.get(f"{url}/api/v1/streams").status_code == 401
        made = httpx.post(f"{url}/api/v1/scopes/s/streams", json={"name": "a"},
                          headers={"Authorization": f"Bearer {token}"})
        assert made.status_code == 201, made.text
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    with tk.connect(home=home) as client:
        assert [s.name for s in client.list_streams()] == ["s/a"]


def test_serve_runs_the_api_beside_the_service_and_no_api_turns_it_off(home: Path) -> None:
    with running(home, "serve", "--frequency", "1h") as (_, url):
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
    port = unused_port()
    process = subprocess.Popen([sys.executable, "-m", "tidekeep.cli.main", "serve", "--no-api", "--listen",
                                f"127.0.0.1:{port}"], env=cli_env(home), stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        for line in process.stderr:  # the service's first log line: started, and no API
            if "serve started" in line:
                break
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0


@pytest.mark.parametrize("listen", ["0.0.0.0:8620", "10.1.2.3:8620", "[::]:8620"])
def test_no_listening_beyond_loopback_without_authentication(home: Path, in_process: InProcess,
                                                             listen: str) -> None:
    assert_one_error_line(in_process("--set", "api.auth=false", "api", "--listen", listen), 2,
                          "refusing to serve the API on")


def test_a_bad_listen_address_is_one_line(home: Path, in_process: InProcess) -> None:
    assert_one_error_line(in_process("api", "--listen", "8620"), 2, "bad --listen: expected HOST:PORT")


def test_tls_needs_both_files_and_then_speaks_https(home: Path, tmp_path: Path, in_process: InProcess) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    assert_one_error_line(in_process("--set", f"api.tls_cert={cert}", "api"), 2,
                          "TLS needs both api.tls_cert and api.tls_key")
    tls = {"TIDEKEEP_API_TLS_CERT": str(cert), "TIDEKEEP_API_TLS_KEY": str(key)}
    context = ssl.create_default_context(cafile=str(cert))
    with running(home, "api", url_scheme="https", verify=context, env=tls) as (_, url):
        assert httpx.get(f"{url}/healthz", verify=context).status_code == 200
        with pytest.raises(httpx.TransportError):
            httpx.get(url.replace("https", "http") + "/healthz", timeout=5)


def test_a_token_is_shown_once_and_only_its_hash_is_kept(home: Path, in_process: InProcess) -> None:
    created = in_process("token", "create", "ci", "--role", "viewer", "--scope", "s", "--json")
    assert created.code == 0, created.stderr
    document = created.json()
    token = document["token"]
    assert document["role"] == "viewer" and document["scope"] == "s" and token.startswith("tk_")
    plain = in_process("token", "create", "ops", "--role", "operator")
    assert plain.stdout.startswith("tk_") and len(plain.stdout.splitlines()) == 1  # the token alone on stdout
    assert "shown only now" in plain.stderr
    listed = in_process("token", "list", "--json").json()
    assert [t["name"] for t in listed] == ["ci", "ops"]
    assert all("token" not in t and "secret_hash" not in t for t in listed)
    with tk.connect(home=home) as client, client.workspace.db.read() as conn:
        stored = conn.execute(sa.select(api_tokens.c.secret_hash).where(api_tokens.c.name == "ci")).scalar_one()
    assert stored.startswith("$argon2id$") and parse_token(token)[1] not in stored
    assert_one_error_line(in_process("token", "create", "ci", "--role", "viewer"), 4, "token 'ci' already exists")
    assert_one_error_line(in_process("token", "create", "x", "--role", "root"), 2, "unknown role 'root'")
    assert in_process("token", "revoke", "ci").code == 0
    assert [t["name"] for t in in_process("token", "list", "--json").json()] == ["ops"]
    assert [t["name"] for t in in_process("token", "list", "--revoked", "--json").json()] == ["ci", "ops"]
    assert_one_error_line(in_process("token", "revoke", "nobody"), 3, "token 'nobody' does not exist")
