"""The CLI with --server: a real `tidekeep` subprocess talks to a live API (tests/helpers/api_server.py)
with a token and no workspace settings at all (HOME and TIDEKEEP_HOME are an empty directory), and
prints what the local command prints on the same workspace."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.api_server import LiveApi, live_api
from tests.helpers.cli_runner import Result, assert_one_error_line, check_ok, cli
from tests.helpers.ports import unused_port

import tidekeep as tk


@dataclass
class Sides:
    """The same workspace through the server (`remote`) and opened locally (`local`)."""

    api: LiveApi
    client: tk.Client
    tmp_path: Path
    metadata_url: str

    def local(self, *args: str) -> Result:
        return cli(self.tmp_path / "ws", "--metadata-url", self.metadata_url, "--storage",
                   str(self.tmp_path / "data"), *args, env={"TIDEKEEP_WRITER_LINGER": "0"})

    def remote(self, *args: str, token: str | None = None, server: str | None = None,
               extra_env: dict[str, str] | None = None) -> Result:
        """The CLI with nothing but the server's URL and a token: no workspace, no database URL."""
        nowhere = self.tmp_path / "empty-home"
        nowhere.mkdir(exist_ok=True)
        env = {"HOME": str(nowhere), "TIDEKEEP_SERVER": server or self.api.url, **(extra_env or {})}
        if token is not None:
            env["TIDEKEEP_TOKEN"] = token
        result = cli(nowhere, *args, env=env)
        assert list(nowhere.iterdir()) == [], "a remote command must not create a workspace"
        return result

    def token(self, role: str, scope: str | None = None) -> str:
        name = role if scope is None else f"{role}-{scope}"
        return self.api.tokens.get(name) or self.api.token(name, role, scope)


@pytest.fixture
def sides(client: tk.Client, tmp_path: Path, metadata_url: str) -> Iterator[Sides]:
    with live_api(client.workspace) as api:
        yield Sides(api, client, tmp_path, metadata_url)


def write_events(client: tk.Client, stream: str, count: int) -> None:
    with client.stream(stream).writer("w") as writer:
        for i in range(count):
            writer.write(f"event-{i}".encode(), routing_key=str(i))


def renamed(document: Any, old: str, new: str) -> Any:
    """`document` with stream `old` called `new` and each stream's uid blanked (two streams differ in them)."""
    text = json.dumps(document).replace(old, new)
    return json.loads(re.sub(r"@[0-9a-f]{8,}", "@UID", text))


def test_create_list_describe_truncate_print_what_the_local_commands_print(sides: Sides) -> None:
    operator = sides.token("operator")
    created = check_ok(sides.remote("stream", "create", "s/a", "--segments", "2", "--retention-size", "1KiB:1MiB",
                                    "--json", token=operator)).json()
    local_created = check_ok(sides.local("stream", "create", "s/b", "--segments", "2", "--retention-size",
                                         "1KiB:1MiB", "--json")).json()
    for document in (created, local_created):
        document.pop("created"), document.pop("created_ms")
    assert renamed(created, "s/a", "s/a") == renamed(local_created, "s/b", "s/a")
    write_events(sides.client, "s/a", 10)
    write_events(sides.client, "s/b", 10)

    viewer = sides.token("viewer")
    for args in (["stream", "list"], ["stream", "list", "--scope", "s"], ["stream", "describe", "s/a"],
                 ["stream", "head", "s/a"], ["stream", "tail", "s/a"]):
        for json_flag in ([], ["--json"]):
            remote = check_ok(sides.remote(*args, *json_flag, token=viewer))
            assert remote.stdout == check_ok(sides.local(*args, *json_flag)).stdout, args + json_flag

    remote_cut = sides.remote("stream", "truncate", "s/a", "tail", "--reason", "remote test", "--json",
                              token=operator)
    local_cut = sides.local("stream", "truncate", "s/b", "tail", "--reason", "remote test", "--json")
    assert renamed(check_ok(remote_cut).json(), "s/a", "s/a") == renamed(check_ok(local_cut).json(), "s/b", "s/a")
    assert remote_cut.json()["bytes_freed"] > 0
    # the text form too: a truncation that finds the head already there
    again = check_ok(sides.remote("stream", "truncate", "s/a", "tail", token=operator)).stdout
    local_again = check_ok(sides.local("stream", "truncate", "s/b", "tail")).stdout
    assert renamed(again, "s/a", "s/a") == renamed(local_again, "s/b", "s/a")

    # the audit trail names the token the truncation came through
    row = sides.client.audit("s/a", limit=2)[-1]
    assert (row["action"], row["actor"], row["reason"]) == ("truncate", "operator", "remote test")


def test_policy_seal_split_and_delete_through_the_server(sides: Sides) -> None:
    operator = sides.token("operator")
    check_ok(sides.local("stream", "create", "s/b", "--segments", "2"))
    check_ok(sides.remote("stream", "create", "s/a", "--segments", "2", token=operator))
    for args in (["stream", "policy", "{}", "--time", "7d:30d", "--json"],
                 ["stream", "split", "{}", "0.1", "--parts", "3", "--json"],
                 ["stream", "merge", "{}", "1.2", "1.3", "--json"],
                 ["stream", "seal", "{}", "--json"],
                 ["stream", "delete", "{}", "--json"]):
        remote = check_ok(sides.remote(*[a.replace("{}", "s/a") for a in args], token=operator)).json()
        local = check_ok(sides.local(*[a.replace("{}", "s/b") for a in args])).json()
        assert renamed(remote, "s/a", "s/a") == renamed(local, "s/b", "s/a"), args
    assert sides.client.list_streams("s") == []


def test_errors_are_the_local_commands_one_line_and_exit_code(sides: Sides) -> None:
    sides.client.create_stream("s/a")
    write_events(sides.client, "s/a", 3)
    before = sides.client.stream("s/a").describe()

    no_token = sides.remote("stream", "list")
    assert_one_error_line(no_token, 17, "token")
    wrong_token = sides.remote("stream", "list", token="tk_not-a-real-token")
    assert wrong_token.code == 17 and len(wrong_token.stderr.splitlines()) == 1

    viewer = sides.remote("stream", "truncate", "s/a", "tail", token=sides.token("viewer"))
    assert_one_error_line(viewer, 18, "operator")
    outside = sides.remote("stream", "describe", "s/a", token=sides.token("viewer", scope="other"))
    assert outside.code == 18

    unknown = sides.remote("stream", "describe", "s/missing", token=sides.token("viewer"))
    assert_one_error_line(unknown, 3, "s/missing")
    assert_one_error_line(sides.remote("stream", "describe", "no-slash", token=sides.token("viewer")), 2,
                          "invalid stream name")
    assert sides.client.stream("s/a").describe() == before

    down = f"http://127.0.0.1:{unused_port()}"
    assert_one_error_line(sides.remote("stream", "list", token=sides.token("viewer"), server=down), 12, down)

    # a command that only works on the workspace says so, instead of using local settings
    write = sides.remote("stream", "write", "s/a", token=sides.token("operator"))
    assert_one_error_line(write, 2, "`tidekeep stream write` is not available with --server")
    assert_one_error_line(sides.remote("config", "show", token=sides.token("viewer")), 2,
                          "`tidekeep config show` is not available with --server")
    assert sides.client.stream("s/a").describe() == before


def test_server_option_and_token_file(sides: Sides, tmp_path: Path) -> None:
    sides.client.create_stream("s/a")
    token_file = tmp_path / "token"
    token_file.write_text(sides.token("viewer") + "\n")
    token_file.chmod(0o600)
    listed = sides.remote("--server", sides.api.url, "--token-file", str(token_file), "stream", "list", "--json",
                          server="http://127.0.0.1:1")  # the flag wins over TIDEKEEP_SERVER
    assert [s["name"] for s in check_ok(listed).json()] == ["s/a"]
    token_file.chmod(0o644)
    assert_one_error_line(sides.remote("--token-file", str(token_file), "stream", "list"), 2,
                          "readable by other users")
    assert_one_error_line(sides.remote("--server", "ftp://x", "stream", "list"), 2, "invalid --server")
