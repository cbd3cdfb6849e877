"""`tidekeep config show`: every effective setting, where it came from, secrets masked; an unknown
setting anywhere gets a "did you mean" (docs/configuration.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.cli import run_cli
from tidekeep.config import CONFIG_FILE_NAME, KEYS, did_you_mean, load_settings
from tidekeep.errors import ConfigError

PASSWORD = "Pw-p6-SECRET"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    assert run_cli(ws, "init").returncode == 0
    return ws


def shown(home: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, dict[str, object]]:
    done = run_cli(home, *args, "config", "show", "--json", env=env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    document = json.loads(done.stdout)
    assert document["config_file"] == str((home / CONFIG_FILE_NAME).resolve())
    return {row.pop("key"): row for row in document["settings"]}


def test_every_setting_with_its_value_and_source(home: Path) -> None:
    (home / CONFIG_FILE_NAME).write_text("writer:\n  batch_size: 1MiB\n  linger: 5s\nsweep:\n  grace: 2h\n")
    rows = shown(home, "--set", "sweep.grace=4h", "--storage", str(home / "elsewhere"),
                 env={"TIDEKEEP_WRITER_LINGER": "7s", "TIDEKEEP_SWEEP_GRACE": "3h"})
    assert list(rows) == list(KEYS)  # every setting, in the documented order
    config = str((home / CONFIG_FILE_NAME).resolve())
    assert rows["writer.batch_size"] == {"value": 2**20, "source": "tidekeep.yaml", "origin": config}
    assert rows["writer.linger"] == {"value": 7000, "source": "environment", "origin": "TIDEKEEP_WRITER_LINGER"}
    assert rows["sweep.grace"] == {"value": 4 * 3_600_000, "source": "flag", "origin": "--set"}
    assert rows["storage.uri"] == {"value": str(home / "elsewhere"), "source": "flag", "origin": "--storage"}
    assert rows["log.level"] == {"value": "INFO", "source": "default", "origin": None}
    # a default that stands for a path shows the path the workspace uses
    assert rows["metadata.url"] == {"value": f"sqlite:///{(home / 'metadata.db').resolve()}", "source": "default",
                                    "origin": None}

    done = run_cli(home, "--set", "sweep.grace=4h", "config", "show", env={"TIDEKEEP_WRITER_LINGER": "7s"})
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line.strip()}
    assert lines["KEY"] == ["VALUE", "SOURCE"]
    assert lines["writer.batch_size"] == ["1MiB", "tidekeep.yaml"]
    assert lines["writer.linger"] == ["7s", "environment", "(TIDEKEEP_WRITER_LINGER)"]
    assert lines["sweep.grace"] == ["4h", "flag", "(--set)"]
    assert lines["archives.target_size"] == ["256MB", "default"]
    assert lines["catalog.data_roots"] == ["(none)", "default"]


def test_only_the_named_settings(home: Path) -> None:
    rows = shown(home, "--set", "writer.linger=1s")  # all, then a selection
    done = run_cli(home, "--set", "writer.linger=1s", "config", "show", "writer.linger", "log.level", "--json")
    assert done.returncode == 0, done.stderr
    picked = json.loads(done.stdout)["settings"]
    assert [row["key"] for row in picked] == ["writer.linger", "log.level"]
    assert picked[0] | {"key": None} == rows["writer.linger"] | {"key": None}


def test_passwords_are_masked_in_text_and_json(home: Path) -> None:
    url = f"postgresql+psycopg://tk:{PASSWORD}@db.example:5432/tidekeep?sslpassword={PASSWORD}&sslmode=require"
    storage = "s3://bucket/tk?region=eu-west-1"  # a storage.uri carrying credentials is refused (test_secrets.py)
    env = {"TIDEKEEP_METADATA_URL": url, "TIDEKEEP_CATALOG_DATA_ROOTS": "s3://feeds/data?region=eu-west-1"}
    done = run_cli(home, "--storage", storage, "config", "show", env=env)
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert "postgresql+psycopg://tk:***@db.example:5432/tidekeep?sslpassword=***&sslmode=require" in done.stdout
    rows = shown(home, "--storage", storage, env=env)
    assert PASSWORD not in json.dumps(rows)
    assert rows["metadata.url"]["value"] == ("postgresql+psycopg://tk:***@db.example:5432/tidekeep"
                                             "?sslpassword=***&sslmode=require")
    assert rows["storage.uri"]["value"] == storage
    assert rows["catalog.data_roots"]["value"] == ["s3://feeds/data?region=eu-west-1"]
    # a data root carrying credentials is refused, like such a storage.uri, and the key never shown
    refused = run_cli(home, "config", "show", env={**env, "TIDEKEEP_CATALOG_DATA_ROOTS": f"s3://AK:{PASSWORD}@feeds/data"})
    assert refused.returncode == 2 and PASSWORD not in refused.stdout + refused.stderr
    assert refused.stderr.startswith("error: bad value for 'catalog.data_roots' in environment variable ")
    assert "carries credentials (a password in its user part)" in refused.stderr


@pytest.mark.parametrize(("args", "env", "config", "expected"), [
    (["--set", "writer.batchsize=1"], {}, "",
     "error: unknown setting 'writer.batchsize' in flags; did you mean 'writer.batch_size'?"),
    ([], {"TIDEKEEP_WRITER_LINGR": "1s"}, "",
     "error: unknown setting in environment variable TIDEKEEP_WRITER_LINGR; did you mean 'TIDEKEEP_WRITER_LINGER'?"),
    ([], {}, "catalog:\n  purge_ages: 1d\n",
     "error: unknown setting 'catalog.purge_ages' in {config}; did you mean 'catalog.purge_age'?"),
    ([], {}, "writr:\n  batch_size: 1MiB\n",
     "error: unknown setting 'writr' in {config}; did you mean 'writer'?"),
    (["--set", "zzz=1"], {}, "", "error: unknown setting 'zzz' in flags"),
])
def test_unknown_settings_suggest_the_closest(home: Path, args: list[str], env: dict[str, str], config: str,
                                              expected: str) -> None:
    if config:
        (home / CONFIG_FILE_NAME).write_text(config)
    done = run_cli(home, *args, "config", "show", env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == expected.format(config=home / CONFIG_FILE_NAME) + "\n"
    # the same error from any command that loads the settings
    assert run_cli(home, *args, "stream", "list", env=env).stderr == done.stderr


def test_an_unknown_key_to_show_suggests_the_closest(home: Path) -> None:
    done = run_cli(home, "config", "show", "writer.lingr")
    assert done.returncode == 2
    assert done.stderr == "error: unknown setting 'writer.lingr'; did you mean 'writer.linger'?\n"


def test_config_show_needs_no_workspace(tmp_path: Path) -> None:
    rows = shown(tmp_path / "nowhere")
    assert rows["spark.master"] == {"value": "local[*]", "source": "default", "origin": None}
    assert not (tmp_path / "nowhere").exists()  # and creates none


def test_did_you_mean_is_the_closest_known_name() -> None:
    for key in KEYS:
        typo = key[:-1] if len(key) > 8 else key + "x"
        assert did_you_mean(typo, KEYS) == f"; did you mean {key!r}?"
    assert did_you_mean("completely.different", KEYS) == ""


def test_python_api_errors_suggest_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("did you mean 'sweep.grace'?")):
        load_settings(tmp_path, {"sweep.grac": "1h"}, env={})
