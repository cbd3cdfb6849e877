"""A workspace created from Python (`tk.connect(..., create=True)`) is the same workspace `tidekeep init`
creates: the CLI pointed at its home uses it without `init`, and the other way round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import tidekeep as tk
from helpers.cli import run_cli
from tidekeep.config import CONFIG_FILE_NAME, DEFAULT_CONFIG_TEXT, config_file_text, read_config_file

STREAM = "py/made"


@pytest.fixture
def metadata_url(new_store_url: str) -> str:
    """This module's subject is creating a store, so both backends start with nothing in them."""
    return new_store_url


def write_events(client: tk.Client, count: int) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with client.stream(STREAM).writer("w") as writer:
        for i in range(count):
            writer.write(b"event-%d" % i, routing_key=f"k{i % 3}")


def cli_sees_the_events(home: Path, count: int) -> None:
    """`tidekeep` with only TIDEKEEP_HOME=home lists the stream and reads every event."""
    listed = run_cli(home, "stream", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s["name"] for s in json.loads(listed.stdout)] == [STREAM]
    read = run_cli(home, "stream", "read", STREAM)
    assert read.returncode == 0, read.stderr
    assert sorted(read.stdout.splitlines()) == sorted(f"event-{i}" for i in range(count))


def test_a_workspace_made_by_connect_create_is_usable_from_the_cli(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    with tk.connect(home, create=True) as client:
        write_events(client, 12)
    cli_sees_the_events(home, 12)


def test_the_store_and_storage_given_to_connect_create_are_the_homes_workspace(
        tmp_path: Path, metadata_url: str) -> None:
    """The home's tidekeep.yaml names the metadata store and storage root given at creation: without
    them, the CLI at that home looked for an embedded store that does not exist ('run tidekeep init')."""
    home = tmp_path / "ws"
    with tk.connect(home, metadata_url=metadata_url, storage=str(tmp_path / "elsewhere"), create=True) as client:
        write_events(client, 9)
        workspace_id = client.workspace_id
    cli_sees_the_events(home, 9)
    assert not (home / "metadata.db").exists() and not (home / "data").exists()  # nothing conjured at home
    with tk.connect(home) as again:  # and Python, given only the home, opens the same workspace
        assert again.workspace_id == workspace_id


def test_a_relative_storage_path_is_written_down_absolute(tmp_path: Path, monkeypatch) -> None:
    """Relative paths are taken against the creating process's directory; the CLI, run from elsewhere
    (the test suite's directory), finds the same storage root."""
    monkeypatch.chdir(tmp_path)
    with tk.connect("ws", storage="rel-data", metadata_url="sqlite:///rel.db", create=True) as client:
        write_events(client, 5)
    monkeypatch.undo()
    written = yaml.safe_load((tmp_path / "ws" / CONFIG_FILE_NAME).read_text())
    assert written["storage"]["uri"] == str(tmp_path / "rel-data")
    assert written["metadata"]["url"] == f"sqlite:///{tmp_path / 'rel.db'}"
    cli_sees_the_events(tmp_path / "ws", 5)


def test_init_from_the_cli_with_flags_is_usable_from_python_and_the_cli_without_them(
        tmp_path: Path, metadata_url: str) -> None:
    home = tmp_path / "ws"
    done = run_cli(home, "--metadata-url", metadata_url, "--storage", str(tmp_path / "d"), "init")
    assert done.returncode == 0, done.stderr
    with tk.connect(home) as client:
        write_events(client, 7)
    cli_sees_the_events(home, 7)


def test_an_existing_config_file_is_left_as_it_is(tmp_path: Path) -> None:
    """A second creation never rewrites the user's file (it may hold their edits)."""
    home = tmp_path / "ws"
    tk.connect(home, create=True).close()
    (home / CONFIG_FILE_NAME).write_text(DEFAULT_CONFIG_TEXT + "# mine\n")
    tk.connect(home, storage=str(home / "data"), create=True).close()
    assert (home / CONFIG_FILE_NAME).read_text() == DEFAULT_CONFIG_TEXT + "# mine\n"


def test_the_default_config_text_is_unchanged_without_a_store_or_storage() -> None:
    assert config_file_text() == DEFAULT_CONFIG_TEXT


# any value a user could type: quotes, '#', ': ', backslashes, non-ASCII; never surrounding blanks,
# which settings strip
values = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=60).filter(
    lambda v: v.strip() == v and "\ufeff" not in v and "\x85" not in v)


@settings(max_examples=200, deadline=None)
@given(url=st.none() | values, uri=st.none() | values)
def test_the_written_config_reads_back_exactly(tmp_path_factory, url: str | None, uri: str | None) -> None:
    path = tmp_path_factory.mktemp("cfg") / CONFIG_FILE_NAME
    path.write_text(config_file_text(url, uri), encoding="utf-8")
    read = read_config_file(path)
    assert read.get("metadata.url") == url and read.get("storage.uri") == uri
    # and every other setting is the template's
    template = tmp_path_factory.mktemp("template") / CONFIG_FILE_NAME
    template.write_text(DEFAULT_CONFIG_TEXT, encoding="utf-8")
    assert {k: v for k, v in read.items() if k not in ("metadata.url", "storage.uri")} == read_config_file(template)
