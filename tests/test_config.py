"""Settings: defaults < tidekeep.yaml < TIDEKEEP_* environment < overrides, validated on load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidekeep.config import (
    CONFIG_FILE_NAME,
    DEFAULT_CONFIG_TEXT,
    KEYS,
    absolute_metadata_url,
    absolute_storage_uri,
    env_name,
    load_settings,
    read_config_file,
)
from tidekeep.errors import ConfigError, InvalidInput


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / CONFIG_FILE_NAME
    path.write_text(text, encoding="utf-8")
    return path


def config_error(call, *args: object, **kwargs: object) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as exc:
        call(*args, **kwargs)
    assert isinstance(exc.value, InvalidInput)
    message = str(exc.value)
    assert message and "\n" not in message
    return message


def test_defaults_without_a_file(tmp_path: Path) -> None:
    s = load_settings(tmp_path / "ws", env={})
    assert dict(s.values) == {key: spec.default for key, spec in KEYS.items()}
    assert s.home == tmp_path / "ws"
    assert s.metadata_url == f"sqlite:///{(tmp_path / 'ws' / 'metadata.db').resolve()}"
    assert s.storage_uri == str((tmp_path / "ws" / "data").resolve())
    assert s["writer.batch_size"] == 4 * 1024 * 1024 and s["writer.linger"] == 100


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    write_config(home, "writer:\n  batch_size: 1MiB\n  linger: 5s\nsweep:\n  grace: 2h\nlog:\n  level: debug\n")
    env = {"TIDEKEEP_WRITER_LINGER": "7s", "TIDEKEEP_SWEEP_GRACE": "3h", "PATH": "/bin"}
    s = load_settings(home, overrides={"sweep.grace": "4h", "writer.batch_size": None}, env=env)
    assert s["writer.batch_size"] == 2**20  # file (the None override means "flag not given")
    assert s["writer.linger"] == 7000  # env over file
    assert s["sweep.grace"] == 4 * 3_600_000  # flag over env over file
    assert s["log.level"] == "DEBUG"  # file, normalised
    assert s["retention.frequency"] == 30 * 60_000  # default
    only_file = load_settings(home, env={})
    assert only_file["writer.linger"] == 5000 and only_file["sweep.grace"] == 2 * 3_600_000


def test_every_key_can_come_from_the_environment(tmp_path: Path) -> None:
    raw = {"metadata.url": "postgresql+psycopg://u@h/db", "metadata.busy_timeout": "5s", "storage.uri": "/data/x",
           "spark.master": "local[2]", "spark.app_name": "tk", "spark.remote": "sc://head:15002",
           "writer.batch_size": "64KiB", "writer.linger": "0",
           "sweep.grace": "10m", "retention.frequency": "1h", "log.level": "warning",
           "catalog.slice_rows": "500", "catalog.parallelism": "4", "catalog.schedule": "30 2 * * *",
           "catalog.purge_age": "3d", "catalog.purge_batch_size": "250", "catalog.purge_failure_threshold": "0",
           "archive_output.retention_period": "43200", "results_cache.retention_period": "null",
           "garbage_collector.sweep_interval.archive": "180", "garbage_collector.sweep_interval.search_result": "15",
           "garbage_collector.logging_level": "debug", "search.max_runtime": "30m", "archives.target_size": "64MiB",
           "watermark.frequency": "250ms", "search.heartbeat_interval": "2s",
           "spark.shared_filesystem": "yes", "catalog.data_roots": "/srv/a, s3://bucket/x/", "storage.fsync": "no",
           "spark.ui": "off", "spark.conf": "{spark.driver.memory: 4g, spark.executor.cores: 2}",
           "api.listen": "[::1]:9000", "api.auth": "false", "api.tls_cert": "/etc/tk/cert.pem",
           "api.tls_key": "/etc/tk/key.pem", "api.metrics_interval": "30s", "api.dashboard": "off",
           "chunks.target_size": "16MiB", "chunks.compaction_interval": "0"}
    assert set(raw) == set(KEYS), "a new setting needs a case here"
    s = load_settings(tmp_path, env={env_name(k): v for k, v in raw.items()})
    assert env_name("writer.batch_size") == "TIDEKEEP_WRITER_BATCH_SIZE"
    assert s.values == {
        "metadata.url": "postgresql+psycopg://u@h/db", "metadata.busy_timeout": 5000, "storage.uri": "/data/x",
        "spark.master": "local[2]", "spark.app_name": "tk", "spark.remote": "sc://head:15002",
        "writer.batch_size": 65536, "writer.linger": 0,
        "sweep.grace": 600_000, "retention.frequency": 3_600_000, "log.level": "WARNING",
        "catalog.slice_rows": 500, "catalog.parallelism": 4, "catalog.schedule": "30 2 * * *",
        "catalog.purge_age": 3 * 86_400_000, "catalog.purge_batch_size": 250, "catalog.purge_failure_threshold": 0,
        "archive_output.retention_period": 43200, "results_cache.retention_period": None,
        "garbage_collector.sweep_interval.archive": 180, "garbage_collector.sweep_interval.search_result": 15,
        "garbage_collector.logging_level": "DEBUG", "search.max_runtime": 1_800_000,
        "archives.target_size": 64 * 1024 * 1024, "watermark.frequency": 250, "search.heartbeat_interval": 2000,
        "spark.shared_filesystem": True, "catalog.data_roots": ("/srv/a", "s3://bucket/x"), "storage.fsync": False,
        "spark.ui": False, "spark.conf": {"spark.driver.memory": "4g", "spark.executor.cores": "2"},
        "api.listen": "[::1]:9000", "api.auth": False, "api.tls_cert": "/etc/tk/cert.pem",
        "api.tls_key": "/etc/tk/key.pem", "api.metrics_interval": 30_000, "api.dashboard": False,
        "chunks.target_size": 16 * 1024 * 1024, "chunks.compaction_interval": 0}
    assert s.metadata_url == "postgresql+psycopg://u@h/db" and s.storage_uri == "/data/x"


def test_home_comes_from_argument_then_tidekeep_home(tmp_path: Path) -> None:
    write_config(tmp_path / "a", "writer:\n  linger: 1s\n")
    write_config(tmp_path / "b", "writer:\n  linger: 2s\n")
    env = {"TIDEKEEP_HOME": str(tmp_path / "b")}
    assert load_settings(env=env)["writer.linger"] == 2000
    assert load_settings(tmp_path / "a", env=env)["writer.linger"] == 1000


def test_the_default_config_text_loads_to_the_defaults(tmp_path: Path) -> None:
    write_config(tmp_path, DEFAULT_CONFIG_TEXT)
    assert dict(load_settings(tmp_path, env={}).values) == {key: spec.default for key, spec in KEYS.items()}


def test_empty_file_and_empty_sections_are_fine(tmp_path: Path) -> None:
    assert read_config_file(write_config(tmp_path, "")) == {}
    assert read_config_file(write_config(tmp_path, "# only a comment\n")) == {}
    assert read_config_file(write_config(tmp_path, "writer: {}\n")) == {}
    # a section whose every key is commented out is YAML null: still an empty section
    assert read_config_file(write_config(tmp_path, "storage:\n  # uri: s3://b\nwriter:\n  linger: 1s\n")) == {
        "writer.linger": 1000}
    assert read_config_file(tmp_path / "missing.yaml") == {}


@pytest.mark.parametrize(("text", "key"), [
    ("writer:\n  batchsize: 1MiB\n", "writer.batchsize"),
    ("colour: blue\n", "colour"),
    ("writer: 5\n", "writer"),
    ("writer:\n  batch_size:\n    value: 1MiB\n", "writer.batch_size"),
    ("metadata:\n  url: x\n  pool:\n    size: 5\n", "metadata.pool"),
])
def test_unknown_yaml_keys_are_rejected_naming_the_dotted_key(tmp_path: Path, text: str, key: str) -> None:
    path = write_config(tmp_path, text)
    message = config_error(load_settings, tmp_path, env={})
    assert repr(key) in message and str(path) in message


@pytest.mark.parametrize(("text", "line"), [
    ("writer:\n  batch_size: [1, 2\n", None),
    ("writer:\n  batch_size: 1MiB\n linger: 5s\n", 3),
    ("writer:\n\tbatch_size: 1\n", 2),
    ("a: b: c\n", 1),
    ("writer: {batch_size: 1\n", None),
])
def test_broken_yaml_names_the_file_and_line(tmp_path: Path, text: str, line: int | None) -> None:
    path = write_config(tmp_path, text)
    message = config_error(load_settings, tmp_path, env={})
    assert message.startswith(f"broken {path}")
    assert re.search(r"at line \d+, column \d+", message)
    if line is not None:
        assert f"at line {line}," in message


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n", "[writer, 1]\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    path = write_config(tmp_path, text)
    assert config_error(load_settings, tmp_path, env={}) == (
        f"broken {path}: the top level must be a mapping of settings")


def test_setting_names_must_be_strings(tmp_path: Path) -> None:
    path = write_config(tmp_path, "1: 2\n")
    assert config_error(read_config_file, path) == f"broken {path}: setting names must be strings, got 1"


def test_unreadable_files_are_config_errors(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE_NAME).mkdir()
    assert "cannot read" in config_error(load_settings, tmp_path, env={})
    other = tmp_path / "other"
    other.mkdir()
    (other / CONFIG_FILE_NAME).write_bytes(b"writer:\n  linger: \xff\xfe\n")
    assert str(other / CONFIG_FILE_NAME) in config_error(load_settings, other, env={})


def test_self_referencing_yaml_is_a_config_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, "&a {x: *a}\n")
    assert "'x'" in config_error(read_config_file, path)
    path = write_config(tmp_path, "writer: &w {batch_size: 1MiB, again: *w}\n")
    assert "'writer.again'" in config_error(read_config_file, path)


@pytest.mark.parametrize(("text", "key", "detail"), [
    ("writer:\n  batch_size: lots\n", "writer.batch_size", "'lots'"),
    ("writer:\n  batch_size: 0\n", "writer.batch_size", "must be greater than zero"),
    ("writer:\n  linger: -5s\n", "writer.linger", "'-5s'"),
    ("writer:\n  linger: yes\n", "writer.linger", "True"),
    ("metadata:\n  busy_timeout: 0s\n", "metadata.busy_timeout", "must be greater than zero"),
    ("log:\n  level: LOUD\n", "log.level", "'LOUD'"),
    ("spark:\n  master: ''\n", "spark.master", "non-empty string"),
    ("metadata:\n  url: 5\n", "metadata.url", "5"),
    ("retention:\n  frequency: [1, 2]\n", "retention.frequency", "[1, 2]"),
    ("sweep:\n  grace: .inf\n", "sweep.grace", "must be finite"),
    ("catalog:\n  slice_rows: 1.5\n", "catalog.slice_rows", "whole number"),
    ("catalog:\n  slice_rows: 0\n", "catalog.slice_rows", "must be greater than zero"),
    ("catalog:\n  parallelism: -1\n", "catalog.parallelism", "must not be negative"),
    ("catalog:\n  purge_failure_threshold: true\n", "catalog.purge_failure_threshold", "True"),
    ("catalog:\n  purge_age: forever\n", "catalog.purge_age", "'forever'"),
    ("spark:\n  shared_filesystem: maybe\n", "spark.shared_filesystem", "'maybe'"),
    ("spark:\n  shared_filesystem: 1\n", "spark.shared_filesystem", "expected true or false"),
    ("spark:\n  ui: maybe\n", "spark.ui", "'maybe'"),
    ("spark:\n  conf: {spark.master: x}\n", "spark.conf", "'spark.master' is tidekeep's own"),
    ("spark:\n  conf: spark.driver.memory=4g\n", "spark.conf", "expected a mapping of Spark confs"),
])
def test_bad_values_name_key_and_file(tmp_path: Path, text: str, key: str, detail: str) -> None:
    path = write_config(tmp_path, text)
    message = config_error(load_settings, tmp_path, env={})
    assert message.startswith(f"bad value for {key!r} in {path}: ")
    assert detail in message


def test_bad_values_in_env_and_flags_name_their_source(tmp_path: Path) -> None:
    message = config_error(load_settings, tmp_path, env={"TIDEKEEP_WRITER_BATCH_SIZE": "big"})
    assert message.startswith("bad value for 'writer.batch_size' in environment variable TIDEKEEP_WRITER_BATCH_SIZE")
    assert "'big'" in message
    message = config_error(load_settings, tmp_path, overrides={"writer.linger": "soon"}, env={})
    assert message.startswith("bad value for 'writer.linger' in flags") and "'soon'" in message
    message = config_error(load_settings, tmp_path, overrides={"writer.lingr": "1s"}, env={})
    assert message == "unknown setting 'writer.lingr' in flags; did you mean 'writer.linger'?"


def test_unknown_env_vars_are_rejected_by_name(tmp_path: Path) -> None:
    assert config_error(load_settings, tmp_path, env={"TIDEKEEP_WRITER_BATCHSIZE": "1"}) == (
        "unknown setting in environment variable TIDEKEEP_WRITER_BATCHSIZE; did you mean 'TIDEKEEP_WRITER_BATCH_SIZE'?")
    assert "TIDEKEEP_" in config_error(load_settings, tmp_path, env={"TIDEKEEP_": "1"})


def test_non_setting_env_vars_are_ignored(tmp_path: Path) -> None:
    env = {"TIDEKEEP_HOME": str(tmp_path), "TIDEKEEP_FAULT": "writer.before_commit",
           "TIDEKEEP_TEST_PG_URL": "postgresql://x", "TIDEKEEP_TEST_ANYTHING": "?", "OTHER_WRITER_LINGER": "1s",
           "tidekeep_writer_linger": "5s"}
    s = load_settings(env=env)
    assert s.home == tmp_path
    assert dict(s.values) == {key: spec.default for key, spec in KEYS.items()}


def test_a_bad_layer_fails_even_when_a_higher_layer_sets_the_key(tmp_path: Path) -> None:
    write_config(tmp_path, "writer:\n  linger: never\n")
    message = config_error(load_settings, tmp_path, overrides={"writer.linger": "1s"}, env={})
    assert "writer.linger" in message and "never" in message


YAML_PIECES = st.sampled_from([
    "writer", "metadata", "log", "level", "batch_size", "linger", "url", "x", ":", ": ", "\n", "  ", "- ", "[", "]",
    "{", "}", ",", "&a ", "*a", "'", '"', "#", "1MiB", "5s", "-1", "yes", "~", "!!binary ", "? ", "|", ">", "\t",
    "%YAML 1.1\n", "---\n", "...\n", "!!python/object:os.system ", "0x1F", ".inf", "DEBUG",
])
yaml_like = st.one_of(
    st.text(max_size=80),
    st.lists(YAML_PIECES, max_size=30).map("".join),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                     st.sampled_from([*KEYS, "writer", "log", "metadata", "x"]) | st.integers(), inner, max_size=3),
                 max_leaves=10).map(lambda data: yaml.safe_dump(data, default_flow_style=None)),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(yaml_like)
def test_fuzz_config_file_gives_settings_or_config_error(tmp_path: Path, text: str) -> None:
    path = write_config(tmp_path, text)
    try:
        values = read_config_file(path)
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert set(values) <= set(KEYS)


def test_clp_archive_keys_nested_as_in_clp_config(tmp_path: Path) -> None:
    write_config(tmp_path, "archive_output:\n  retention_period: 43200\nresults_cache:\n  retention_period: 1440\n"
                           "garbage_collector:\n  logging_level: INFO\n  sweep_interval:\n    archive: 180\n"
                           "    search_result: 15\n")
    s = load_settings(tmp_path, env={})
    assert s["archive_output.retention_period"] == 43200 and s["results_cache.retention_period"] == 1440
    assert s["garbage_collector.sweep_interval.archive"] == 180
    assert s["garbage_collector.sweep_interval.search_result"] == 15


def test_clp_minute_keys_also_take_durations_with_units(tmp_path: Path) -> None:
    write_config(tmp_path, "archive_output:\n  retention_period: 30d\nresults_cache:\n  retention_period: 1d\n"
                           "garbage_collector:\n  sweep_interval:\n    archive: 3h\n    search_result: 15m\n")
    s = load_settings(tmp_path, env={})
    assert s["archive_output.retention_period"] == 43200 and s["results_cache.retention_period"] == 1440
    assert s["garbage_collector.sweep_interval.archive"] == 180
    assert s["garbage_collector.sweep_interval.search_result"] == 15
    from_env = load_settings(tmp_path, env={"TIDEKEEP_ARCHIVE_OUTPUT_RETENTION_PERIOD": "2w",
                                            "TIDEKEEP_RESULTS_CACHE_RETENTION_PERIOD": "90"})
    assert from_env["archive_output.retention_period"] == 20160  # a unit: converted to minutes
    assert from_env["results_cache.retention_period"] == 90  # a plain number stays minutes


def test_clp_archive_key_defaults(tmp_path: Path) -> None:
    s = load_settings(tmp_path, env={})
    assert s["archive_output.retention_period"] is None  # retention is off by default, as in CLP
    assert s["results_cache.retention_period"] == 60
    assert s["garbage_collector.sweep_interval.archive"] == 60
    assert s["garbage_collector.sweep_interval.search_result"] == 30
    assert s["search.max_runtime"] == 3_600_000
    assert s["search.heartbeat_interval"] == 10_000


@pytest.mark.parametrize(("text", "key"), [
    ("archive_output:\n  retention_period: 0\n", "archive_output.retention_period"),
    ("archive_output:\n  retention_period: 1.5\n", "archive_output.retention_period"),
    ("archive_output:\n  retention_period: true\n", "archive_output.retention_period"),
    ("results_cache:\n  retention_period: -5\n", "results_cache.retention_period"),
    ("results_cache:\n  retention_period: 90s\n", "results_cache.retention_period"),
    ("archive_output:\n  retention_period: 0d\n", "archive_output.retention_period"),
    ("garbage_collector:\n  sweep_interval:\n    archive: 1.5m\n", "garbage_collector.sweep_interval.archive"),
    ("garbage_collector:\n  sweep_interval:\n    archive: null\n", "garbage_collector.sweep_interval.archive"),
    ("garbage_collector:\n  sweep_interval:\n    stream: 5\n", "garbage_collector.sweep_interval.stream"),
    ("garbage_collector:\n  sweep_interval: 5\n", "garbage_collector.sweep_interval"),
    ("archives:\n  target_size: 0\n", "archives.target_size"),
    ("search:\n  heartbeat_interval: 0\n", "search.heartbeat_interval"),
    ("search:\n  heartbeat_interval: -5s\n", "search.heartbeat_interval"),
    ("search:\n  heartbeat_interval: soon\n", "search.heartbeat_interval"),
])
def test_clp_archive_keys_reject_bad_values_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    write_config(tmp_path, text)
    with pytest.raises(ConfigError, match=re.escape(repr(key))):
        load_settings(tmp_path, env={})


@pytest.mark.parametrize(("value", "expected"), [
    ("true", True), ("Yes", True), ("on", True), ("1", True), (True, True),
    ("false", False), ("NO", False), ("off", False), ("0", False), (False, False),
])
def test_shared_filesystem_takes_yes_and_no_words(tmp_path: Path, value: object, expected: bool) -> None:
    assert load_settings(tmp_path, overrides={"spark.shared_filesystem": value}, env={})[
        "spark.shared_filesystem"] is expected
    assert load_settings(tmp_path, env={})["spark.shared_filesystem"] is False


@pytest.mark.parametrize("layer", ["file", "env", "flag"])
def test_relative_sqlite_and_storage_paths_are_made_absolute_against_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layer: str) -> None:
    """Spark executors and the Python workers Spark plans in resolve paths against their own working
    directory: a relative path given in any layer is absolute once the settings are loaded."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    given = {"metadata.url": "sqlite:///state/meta.db?timeout=5", "storage.uri": "chunks/../data"}
    home = tmp_path / "ws"
    env: dict[str, str] = {}
    overrides: dict[str, str] = {}
    if layer == "file":
        write_config(home, "metadata:\n  url: sqlite:///state/meta.db?timeout=5\nstorage:\n  uri: chunks/../data\n")
    elif layer == "env":
        env = {env_name(k): v for k, v in given.items()}
    else:
        overrides = given
    settings = load_settings(home, overrides, env=env)
    assert settings.metadata_url == f"sqlite:///{work}/state/meta.db?timeout=5"
    assert settings.storage_uri == f"{work}/data"
    monkeypatch.chdir(tmp_path)  # fixed when loaded: a later change of directory changes nothing
    assert settings.metadata_url == f"sqlite:///{work}/state/meta.db?timeout=5"


@pytest.mark.parametrize("url", [
    "sqlite:////abs/meta.db", "sqlite://", "sqlite:///:memory:", "sqlite:///file:meta.db?mode=ro&uri=true",
    "postgresql+psycopg://u:p@h:5432/db", "postgresql://h/db?options=-csearch_path%3Dx",
])
def test_other_metadata_urls_are_kept_as_given(tmp_path: Path, url: str) -> None:
    assert absolute_metadata_url(url) == url
    assert load_settings(tmp_path, overrides={"metadata.url": url}, env={}).metadata_url == url


@pytest.mark.parametrize("uri", ["/abs/data", "s3://bucket/prefix", "file:///abs/data", "gs://b/p", "mock://x"])
def test_other_storage_uris_are_kept_as_given(tmp_path: Path, uri: str) -> None:
    assert absolute_storage_uri(uri) == uri
    assert load_settings(tmp_path, overrides={"storage.uri": uri}, env={}).storage_uri == uri


def test_a_sqlite_url_keeps_its_driver_name_when_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert absolute_metadata_url("sqlite+pysqlite:///m.db") == f"sqlite+pysqlite:///{tmp_path}/m.db"
    assert absolute_storage_uri("data") == f"{tmp_path}/data"
def test_data_roots_from_a_yaml_list_the_environment_and_flags(tmp_path: Path) -> None:
    write_config(tmp_path / "ws", "catalog:\n  data_roots:\n    - /srv/a/\n    - file:///srv/b//c/./\n"
                                  "    - s3://bucket/feeds\n    - /srv/a\n")
    s = load_settings(tmp_path / "ws", env={})
    assert s["catalog.data_roots"] == ("/srv/a", "/srv/b/c", "s3://bucket/feeds")  # normal forms, repeats dropped
    s = load_settings(tmp_path / "ws", env={"TIDEKEEP_CATALOG_DATA_ROOTS": " /srv/x , s3://b/%61"})
    assert s["catalog.data_roots"] == ("/srv/x", "s3://b/a")
    assert load_settings(tmp_path / "ws", overrides={"catalog.data_roots": ""}, env={})["catalog.data_roots"] == ()
    # a literal "%" in a URI path stays quoted, so the stored form parses back to the same place
    s = load_settings(tmp_path / "ws", overrides={"catalog.data_roots": "s3://b/100%25"}, env={})
    assert s["catalog.data_roots"] == ("s3://b/100%25",)
    assert load_settings(tmp_path / "ws", overrides={"catalog.data_roots": s["catalog.data_roots"][0]},
                         env={})["catalog.data_roots"] == ("s3://b/100%25",)
    # pyarrow's options stay with the root (the purge opens the store with them), after its normal form
    s = load_settings(tmp_path / "ws", overrides={"catalog.data_roots": "s3://b//feeds/?endpoint_override=h:9&scheme=http"},
                      env={})
    assert s["catalog.data_roots"] == ("s3://b/feeds?endpoint_override=h:9&scheme=http",)


@pytest.mark.parametrize(("value", "detail"), [
    ("data/x", "'data/x' is neither an absolute path nor a URI"),
    ("/a,,/b", "got the entry ''"),
    ("file://host/x", "'file://host/x' names a host"),
    ("s3://b/x?region=eu#top", "'s3://b/x?region=eu#top' has a fragment"),
    ("s3://b/x?region=eu,s3://b/x/?region=us", "'s3://b/x' is given twice with different options"),
    ("s3://b/%ff", "not valid percent-encoded UTF-8"),
])
def test_bad_data_roots_name_the_key(tmp_path: Path, value: str, detail: str) -> None:
    message = config_error(load_settings, tmp_path, overrides={"catalog.data_roots": value}, env={})
    assert message.startswith("bad value for 'catalog.data_roots' in flags: ") and detail in message
    path = write_config(tmp_path / "ws", "catalog:\n  data_roots: 5\n")
    message = config_error(load_settings, tmp_path / "ws", env={})
    assert message == f"bad value for 'catalog.data_roots' in {path}: expected a list of absolute paths or URIs, got 5"


def test_data_roots_may_not_overlap_tidekeeps_own_areas(tmp_path: Path) -> None:
    home = (tmp_path / "ws").resolve()
    storage = home / "data"

    def problem(roots: str, **env: str) -> str:
        return config_error(load_settings, home, overrides={"catalog.data_roots": roots}, env=env)

    assert problem(str(storage)) == (f"bad value for 'catalog.data_roots' in flags: {str(storage)!r} contains "
                                     f"tidekeep's stream data ({storage}/streams)")
    assert problem(f"/elsewhere,{storage}/streams/s") .endswith(
        f"{storage}/streams/s' lies inside tidekeep's stream data ({storage}/streams)")
    assert "search results" in problem(f"{storage}/search-results/1")
    assert "log archives" in problem(f"{storage}/ARCHIVES")  # case is ignored against tidekeep's areas
    elsewhere = str(tmp_path / "store")  # storage outside the home, so the home holds only these two
    assert f"contains tidekeep's metadata database ({home}/metadata.db)" in problem(str(home) + "/",
                                                                                  TIDEKEEP_STORAGE_URI=elsewhere)
    assert "workspace settings file" in problem(f"file://{home}/tidekeep.yaml")
    assert "metadata database" in problem(f"{tmp_path}/db", TIDEKEEP_METADATA_URL=f"sqlite:///{tmp_path}/db/m.db")
    message = problem(str(storage), TIDEKEEP_CATALOG_DATA_ROOTS="/ok")  # flags win, and are named
    assert message.startswith("bad value for 'catalog.data_roots' in flags: ")
    env_message = config_error(load_settings, home, env={"TIDEKEEP_CATALOG_DATA_ROOTS": str(home)})
    assert env_message.startswith("bad value for 'catalog.data_roots' in environment variable "
                                  "TIDEKEEP_CATALOG_DATA_ROOTS: ")
    # a root reached through a symlink is compared as it resolves
    (tmp_path / "link").symlink_to(storage, target_is_directory=True)
    assert "contains tidekeep's stream data" in problem(str(tmp_path / "link"))
    # a root that only shares a prefix with an area, another bucket, or a data folder inside the storage
    # root that is none of tidekeep's areas: fine
    fine = f"{storage}2,{home}/data/catalog,{home}/streams,s3://bucket/streams,/srv/x"
    assert load_settings(home, overrides={"catalog.data_roots": fine}, env={})["catalog.data_roots"] == tuple(
        fine.split(","))
    # with the metadata in PostgreSQL there is no metadata file to protect, but tidekeep.yaml stays
    pg = {"TIDEKEEP_METADATA_URL": "postgresql+psycopg://u@h/db", "TIDEKEEP_STORAGE_URI": elsewhere}
    assert load_settings(home, overrides={"catalog.data_roots": f"{home}/metadata.db"}, env=pg)
    assert "workspace settings file" in problem(str(home), **pg)
# ---- storage.fsync: a flag ------------------------------------------------------------------------

FLAG_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def test_storage_fsync_is_on_by_default(tmp_path: Path) -> None:
    assert load_settings(tmp_path, env={})["storage.fsync"] is True


@pytest.mark.parametrize(("raw", "expected"), [
    ("true", True), ("TRUE", True), (" Yes ", True), ("1", True), ("false", False), ("No", False), ("0", False)])
def test_storage_fsync_takes_true_false_words_from_env_and_flags(tmp_path: Path, raw: str, expected: bool) -> None:
    assert load_settings(tmp_path, env={"TIDEKEEP_STORAGE_FSYNC": raw})["storage.fsync"] is expected
    assert load_settings(tmp_path, overrides={"storage.fsync": raw}, env={})["storage.fsync"] is expected


@pytest.mark.parametrize(("text", "expected"), [
    ("storage:\n  fsync: false\n", False), ("storage:\n  fsync: no\n", False), ("storage:\n  fsync: 0\n", False),
    ("storage:\n  fsync: true\n", True), ("storage:\n  fsync: 1\n", True), ("storage:\n  fsync: 'yes'\n", True)])
def test_storage_fsync_from_yaml(tmp_path: Path, text: str, expected: bool) -> None:
    write_config(tmp_path, text)
    assert load_settings(tmp_path, env={})["storage.fsync"] is expected


@pytest.mark.parametrize("raw", ["on", "off", "2", "-1", "", "  ", "y", "n", "truee", "1.0", "none"])
def test_storage_fsync_refuses_other_words_naming_key_and_source(tmp_path: Path, raw: str) -> None:
    shown = " ".join(repr(raw).split())  # error messages are one line with single blanks
    message = config_error(load_settings, tmp_path, env={"TIDEKEEP_STORAGE_FSYNC": raw})
    assert message.startswith("bad value for 'storage.fsync' in environment variable TIDEKEEP_STORAGE_FSYNC: ")
    assert shown in message
    message = config_error(load_settings, tmp_path, overrides={"storage.fsync": raw}, env={})
    assert message.startswith("bad value for 'storage.fsync' in flags: ") and shown in message


@pytest.mark.parametrize(("text", "detail"), [
    ("storage:\n  fsync: 2\n", "2"), ("storage:\n  fsync: 1.0\n", "1.0"), ("storage:\n  fsync: null\n", "None"),
    ("storage:\n  fsync: [true]\n", "[True]"), ("storage:\n  fsync: maybe\n", "'maybe'")])
def test_storage_fsync_refuses_other_yaml_values(tmp_path: Path, text: str, detail: str) -> None:
    path = write_config(tmp_path, text)
    message = config_error(load_settings, tmp_path, env={})
    assert message.startswith(f"bad value for 'storage.fsync' in {path}: ") and detail in message


flag_text = st.one_of(
    st.text(max_size=8),
    st.tuples(st.sampled_from([*sorted(FLAG_WORDS), "on", "off", "2"]), st.sampled_from(["", " ", "\t"]),
              st.booleans()).map(lambda t: t[1] + (t[0].upper() if t[2] else t[0]) + t[1]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag_text)
def test_storage_fsync_flag_matches_the_word_table(tmp_path: Path, raw: str) -> None:
    """Oracle: exactly the six words (any case, surrounding blanks) are accepted, each with its meaning."""
    expected = FLAG_WORDS.get(raw.strip().lower())
    if expected is None:
        assert "'storage.fsync'" in config_error(load_settings, tmp_path, overrides={"storage.fsync": raw}, env={})
    else:
        assert load_settings(tmp_path, overrides={"storage.fsync": raw}, env={})["storage.fsync"] is expected


def test_a_retired_setting_is_ignored_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A tidekeep.yaml written by an older `tidekeep init` names the catalog job's old settings: it
    still loads, and the log says what replaced them."""
    write_config(tmp_path, "catalog:\n  delete_batch_size: 1000\n  partitions: 2\n  slice_rows: 50\n")
    with caplog.at_level("WARNING", logger="tidekeep.config"):
        settings = load_settings(tmp_path, env={})
    assert settings["catalog.slice_rows"] == 50
    assert "catalog.delete_batch_size" not in KEYS and "catalog.partitions" not in KEYS
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "'catalog.delete_batch_size'" in warned and "catalog.slice_rows" in warned
