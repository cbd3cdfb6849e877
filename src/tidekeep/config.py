"""Settings: defaults < tidekeep.yaml < TIDEKEEP_* environment < flags, validated on load.

Every key has one dotted name (`writer.batch_size`), used in YAML (nested), in the environment
(`TIDEKEEP_WRITER_BATCH_SIZE`) and in flags (`--set writer.batch_size=8MiB`). Unknown keys are
rejected with the key named and the closest known one suggested, so a typo never silently falls
back to a default. Settings remember where each value came from (`tidekeep config show`).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError, InvalidInput
from .units import parse_duration_ms, parse_minutes, parse_size_bytes

CONFIG_FILE_NAME = "tidekeep.yaml"
DEFAULT_HOME = ".tidekeep"
MAX_EVENT_SIZE = 8 * 1024 * 1024

# Environment variables with the TIDEKEEP_ prefix that are not settings.
_ENV_NOT_SETTINGS = {"TIDEKEEP_HOME", "TIDEKEEP_FAULT", "TIDEKEEP_FAULT_RAISE", "TIDEKEEP_PAUSE"}
_ENV_IGNORED_PREFIXES = ("TIDEKEEP_TEST_",)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"expected a non-empty string, got {value!r}")
    return value.strip()


def _optional_text(value: Any) -> str | None:
    return None if value is None or value == "" else _text(value)


def _level(value: Any) -> str:
    text = _text(value).upper()
    if text not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise InvalidInput(f"expected DEBUG, INFO, WARNING or ERROR, got {value!r}")
    return text


def _positive(parse: Callable[[Any], int]) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        result = parse(value)
        if result <= 0:
            raise InvalidInput(f"must be greater than zero, got {value!r}")
        return result

    return check


def _count(value: Any) -> int:
    """A whole number from YAML, the environment or a flag ("1000" or 1000; not 1.5, not true)."""
    if isinstance(value, bool):
        raise InvalidInput(f"expected a whole number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise InvalidInput(f"expected a whole number, got {value!r}")


_TRUE_WORDS = {"true", "yes", "1"}
_FALSE_WORDS = {"false", "no", "0"}


def _flag(value: Any) -> bool:
    """On or off: a YAML boolean, or true/false/yes/no/1/0 (any case) from the environment or a flag.
    Anything else ("on", "2", "") is refused rather than read as a guess."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    raise InvalidInput(f"expected true or false (yes/no, 1/0), got {value!r}")


def _non_negative(value: Any) -> int:
    result = _count(value)
    if result < 0:
        raise InvalidInput(f"must not be negative, got {value!r}")
    return result


def _minutes_or_null(value: Any) -> int | None:
    """A retention period as CLP writes it (whole minutes above zero) or as a duration ("30d"), or
    null to disable."""
    if value is None or (isinstance(value, str) and value.strip().lower() in {"", "null", "none"}):
        return None
    return parse_minutes(value)


def _minutes(value: Any) -> int:
    return parse_minutes(value)


def _boolean(value: Any) -> bool:
    """true/false from YAML, or true/false, yes/no, on/off, 1/0 from the environment or a flag."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "yes", "on", "1"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"false", "no", "off", "0"}:
        return False
    raise InvalidInput(f"expected true or false, got {value!r}")


def _cron(value: Any) -> str:
    from .catalog.schedule import check_schedule  # on use: the settings module stays import-light

    return check_schedule(value)


def _data_roots(value: Any) -> tuple[str, ...]:
    """Absolute paths or URIs, as a YAML list or a comma-separated string, each in its normal form
    (docs/catalog-purge.md); repeats are dropped. Whether they overlap tidekeep's own areas depends
    on other keys, so load_settings checks that once every key is known."""
    from .catalog.locations import Refused, parse_absolute  # on use, as _cron

    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise InvalidInput(f"expected a list of absolute paths or URIs, got {value!r}")
    roots: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise InvalidInput(f"expected absolute paths or URIs, got the entry {item!r}")
        try:
            place = parse_absolute(item.strip())
        except Refused as exc:
            raise InvalidInput(f"{item.strip()!r} {exc}") from None
        if place.uri not in roots:
            roots.append(place.uri)
    return tuple(roots)


@dataclass(frozen=True)
class _Key:
    parse: Callable[[Any], Any]
    default: Any
    help: str


KEYS: dict[str, _Key] = {
    "metadata.url": _Key(_optional_text, None, "SQLAlchemy URL; default: SQLite file <home>/metadata.db"),
    "metadata.busy_timeout": _Key(_positive(parse_duration_ms), 30_000, "SQLite busy timeout"),
    "storage.uri": _Key(_optional_text, None, "pyarrow.fs URI or path for data; default: <home>/data"),
    "storage.fsync": _Key(_flag, True, "fsync local data files and their directories before the metadata commit "
                                       "that names them, and commit SQLite with synchronous=FULL"),
    "spark.master": _Key(_text, "local[*]", "Spark master URL"),
    "spark.app_name": _Key(_text, "tidekeep", "Spark application name"),
    "spark.shared_filesystem": _Key(_boolean, False,
                                    "every Spark executor sees the driver's files at the same paths (so a "
                                    "SQLite metadata file and local storage work with a non-local master)"),
    "writer.batch_size": _Key(_positive(parse_size_bytes), 4 * 1024 * 1024, "flush a segment batch at this size"),
    "writer.linger": _Key(parse_duration_ms, 100, "flush pending events after this long"),
    "sweep.grace": _Key(parse_duration_ms, 3_600_000,
                        "uncommitted chunk files younger than this are never swept"),
    "retention.frequency": _Key(_positive(parse_duration_ms), 30 * 60_000, "retention cycle spacing"),
    "watermark.frequency": _Key(_positive(parse_duration_ms), 1_000,
                                "how often `tidekeep serve` computes the watermarks of streams with recent marks"),
    "log.level": _Key(_level, "INFO", "log level"),
    "catalog.delete_batch_size": _Key(_positive(_count), 1000,
                                      "records logically deleted per UPDATE (create-time slices)"),
    "catalog.partitions": _Key(_non_negative, 0, "Spark partitions the job reads records in (0: Spark's default)"),
    "catalog.schedule": _Key(_cron, "0 0 * * *", "cron schedule (UTC) of the catalog job under `tidekeep serve`"),
    "catalog.purge_age": _Key(parse_duration_ms, 7 * 86_400_000,
                              "records DELETED for longer than this have their data purged"),
    "catalog.purge_batch_size": _Key(_positive(_count), 1000, "records purged per batch"),
    "catalog.purge_failure_threshold": _Key(_non_negative, 100, "the purge stops after more failures than this"),
    "catalog.data_roots": _Key(_data_roots, (), "absolute paths or URIs under which records may name their "
                                                "data; relative locations are under the storage root"),
    # archives: the keys of CLP's etc/clp-config.yml, with CLP's units (minutes) and defaults
    "archive_output.retention_period": _Key(_minutes_or_null, None,
                                            "archive retention in minutes after the archive's newest log "
                                            "timestamp; null keeps archives forever"),
    "results_cache.retention_period": _Key(_minutes_or_null, 60,
                                           "search results are deleted this many minutes after their search "
                                           "ended; null keeps them forever"),
    "garbage_collector.sweep_interval.archive": _Key(_minutes, 60, "minutes between archive collector sweeps"),
    "garbage_collector.sweep_interval.search_result": _Key(_minutes, 30,
                                                           "minutes between search-result collector sweeps"),
    "garbage_collector.logging_level": _Key(_level, "INFO", "log level of the garbage collectors"),
    "search.max_runtime": _Key(_positive(parse_duration_ms), 3_600_000,
                               "a search RUNNING longer than this is marked KILLED by the archive collector"),
    "search.heartbeat_interval": _Key(_positive(parse_duration_ms), 10_000,
                                      "a running search writes its heartbeat this often; one silent for "
                                      "3 intervals is marked FAILED by the archive collector"),
    "archives.target_size": _Key(_positive(parse_size_bytes), 256 * 1000 * 1000,
                                 "an archive file is closed once its stored (compressed) size reaches this"),
}


def value_kind(key: str) -> str | None:
    """"duration" for a setting held in milliseconds, "size" for one held in bytes, else None: told
    by what its parser makes of a duration and of a size, so no list of them can drift."""
    for kind, text, expected in (("duration", "2s", 2000), ("size", "2KiB", 2048)):
        try:
            if KEYS[key].parse(text) == expected:
                return kind
        except (InvalidInput, ValueError):
            pass
    return None


def env_name(key: str) -> str:
    return "TIDEKEEP_" + key.upper().replace(".", "_")


_ENV_TO_KEY = {env_name(key): key for key in KEYS}


# where a setting's value came from, lowest precedence first
DEFAULT, CONFIG_FILE, ENVIRONMENT, FLAG = "default", "tidekeep.yaml", "environment", "flag"


@dataclass(frozen=True)
class Source:
    """Where a setting's value came from: `kind` (DEFAULT, CONFIG_FILE, ENVIRONMENT or FLAG) and
    `origin`, the file path or the environment variable (empty for a default or a flag)."""

    kind: str
    origin: str = ""


@dataclass(frozen=True)
class Settings:
    home: Path
    values: Mapping[str, Any]
    sources: Mapping[str, Source] = field(default_factory=dict)  # a key absent here: its default

    def source(self, key: str) -> Source:
        return self.sources.get(key, Source(DEFAULT))

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def metadata_url(self) -> str:
        url = self.values["metadata.url"]
        return url or f"sqlite:///{(self.home / 'metadata.db').resolve()}"

    @property
    def storage_uri(self) -> str:
        uri = self.values["storage.uri"]
        return uri or str((self.home / "data").resolve())


# every proper prefix of a key is a section ("garbage_collector" and "garbage_collector.sweep_interval")
_SECTIONS = {".".join(key.split(".")[:i]) for key in KEYS for i in range(1, key.count(".") + 1)}


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in data.items():
        key = f"{prefix}{name}"
        if key in _SECTIONS and (value is None or isinstance(value, Mapping)):
            # Only known sections are descended into (an empty one, "storage:", is None): a mapping
            # anywhere else is reported under its own key, and self-referencing YAML (&a {x: *a})
            # cannot recurse forever.
            flat.update(_flatten(value or {}, key + "."))
        else:
            flat[key] = value
    return flat


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` is most likely a typo of, if any is close enough."""
    matches = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """"; did you mean 'x'?" for the closest known name, or "" when none is close."""
    match = closest(name, known)
    return f"; did you mean {match!r}?" if match is not None else ""


def _parse_value(key: str, value: Any, source: str) -> Any:
    if key not in KEYS:
        # a misspelt section ("writr") is compared with the sections, a misspelt key with the keys
        raise ConfigError(f"unknown setting {key!r} in {source}{did_you_mean(key, [*KEYS, *_SECTIONS])}")
    try:
        return KEYS[key].parse(value)
    except InvalidInput as exc:
        raise ConfigError(f"bad value for {key!r} in {source}: {exc}") from None


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings in a tidekeep.yaml, validated; {} when the file does not exist."""
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"broken {path}{where}: {problem}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"broken {path}: the top level must be a mapping of settings")
    for name in data:
        if not isinstance(name, str):
            raise ConfigError(f"broken {path}: setting names must be strings, got {name!r}")
    return {key: _parse_value(key, value, str(path)) for key, value in _flatten(data).items()}


def resolve_home(home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(home or env.get("TIDEKEEP_HOME") or DEFAULT_HOME)


def load_settings(
    home: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Defaults < <home>/tidekeep.yaml < TIDEKEEP_* environment < overrides (flags)."""
    env = os.environ if env is None else env
    home_path = resolve_home(home, env)
    values = {key: spec.default for key, spec in KEYS.items()}
    config_path = home_path / CONFIG_FILE_NAME
    from_file = read_config_file(config_path)
    values.update(from_file)
    sources = dict.fromkeys(from_file, Source(CONFIG_FILE, str(config_path)))
    for name, raw in env.items():
        if not name.startswith("TIDEKEEP_") or name in _ENV_NOT_SETTINGS or name.startswith(_ENV_IGNORED_PREFIXES):
            continue
        if name not in _ENV_TO_KEY:
            raise ConfigError(f"unknown setting in environment variable {name}"
                              f"{did_you_mean(name, [*_ENV_TO_KEY, *_ENV_NOT_SETTINGS])}")
        values[_ENV_TO_KEY[name]] = _parse_value(_ENV_TO_KEY[name], raw, f"environment variable {name}")
        sources[_ENV_TO_KEY[name]] = Source(ENVIRONMENT, name)
    for key, raw in (overrides or {}).items():
        if raw is not None:
            values[key] = _parse_value(key, raw, "flags")
            sources[key] = Source(FLAG)
    # relative paths are taken against this process's working directory, now: Spark executors and
    # the Python workers Spark plans in run elsewhere, and would resolve them against their own
    if values["metadata.url"] is not None:
        values["metadata.url"] = absolute_metadata_url(values["metadata.url"])
    if values["storage.uri"] is not None:
        values["storage.uri"] = absolute_storage_uri(values["storage.uri"])
    settings = Settings(home=home_path, values=values, sources=sources)
    if values["catalog.data_roots"]:
        from .catalog.location_rules import data_root_problem  # on use: only when data roots are set

        problem = data_root_problem(settings)
        if problem is not None:
            where = source_text(settings.source("catalog.data_roots"))
            raise ConfigError(f"bad value for 'catalog.data_roots' in {where}: {problem}")
    return settings


def source_text(source: Source) -> str:
    """A source as error messages name it: "/ws/tidekeep.yaml", "environment variable TIDEKEEP_X", "flags"."""
    if source.kind == CONFIG_FILE:
        return source.origin
    if source.kind == ENVIRONMENT:
        return f"environment variable {source.origin}"
    return "flags" if source.kind == FLAG else "defaults"


def absolute_metadata_url(url: str) -> str:
    """A SQLite URL whose file path is relative, made absolute against the working directory; every
    other URL (PostgreSQL, in-memory SQLite, a `file:` URI database, an absolute path) as given."""
    if not url.strip().lower().startswith("sqlite"):
        return url
    import sqlalchemy as sa

    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        return url  # not a URL: the metadata store reports it when it opens
    database = parsed.database
    if (parsed.get_backend_name() != "sqlite" or not database or database == ":memory:"
            or database.startswith("file:") or os.path.isabs(database)):
        return url
    return parsed.set(database=os.path.abspath(database)).render_as_string(hide_password=False)


def absolute_storage_uri(uri: str) -> str:
    """A storage path that is relative, made absolute against the working directory; a URI
    (`s3://…`, `file:///…`) or an absolute path as given."""
    if "://" in uri or os.path.isabs(uri):
        return uri
    return os.path.abspath(uri)


DEFAULT_CONFIG_TEXT = """\
# tidekeep workspace settings. Precedence: defaults < this file < TIDEKEEP_* env < CLI flags.
# Every key can also be set as an environment variable, e.g. TIDEKEEP_METADATA_URL.
metadata:
  # url: postgresql+psycopg://user:password@host:5432/tidekeep   # default: SQLite file in this directory
  busy_timeout: 30s
# storage:
#   uri: s3://bucket/tidekeep    # any pyarrow.fs URI; default: ./data in this directory
#   fsync: true                  # local data is on disk before its commit; false trades that for speed
spark:
  master: local[*]
  # shared_filesystem: true  # every executor sees this machine's files (SQLite, local storage) at the same paths
writer:
  batch_size: 4MiB
  linger: 100ms
sweep:
  grace: 1h
retention:
  frequency: 30m
watermark:
  frequency: 1s              # watermarks of streams whose writers note time, under `tidekeep serve`
catalog:
  delete_batch_size: 1000
  schedule: "0 0 * * *"      # the catalog retention job under `tidekeep serve` (cron, UTC)
  purge_age: 7d
  # data_roots:              # absolute paths or URIs where records may keep their data; a record
  #   - /srv/stroom/data     # with an absolute location elsewhere is refused (relative locations
  #   - s3://bucket/feeds    # are under the storage root); never inside tidekeep's own areas
# archives (CLP's settings, in minutes): archive retention is off until you set it
archive_output:
  retention_period: null     # e.g. 43200 = 30 days after an archive's newest log timestamp
results_cache:
  retention_period: 60
garbage_collector:
  sweep_interval:
    archive: 60
    search_result: 30
search:
  max_runtime: 1h            # longer-running searches are marked KILLED so they cannot block collection
  heartbeat_interval: 10s    # a search silent for 3 intervals (its process died) is marked FAILED
archives:
  target_size: 256MB
"""

_URL_TEMPLATE_LINE = ("  # url: postgresql+psycopg://user:password@host:5432/tidekeep"
                      "   # default: SQLite file in this directory\n")
_STORAGE_TEMPLATE_LINES = ("# storage:\n"
                           "#   uri: s3://bucket/tidekeep    # any pyarrow.fs URI; default: ./data in this directory\n"
                           "#   fsync:")


def _yaml_scalar(value: str) -> str:
    """One double-quoted YAML line that reads back as exactly `value` (quotes, '#', ': ' included)."""
    return yaml.safe_dump(value, default_style='"', allow_unicode=True, width=float("inf")).rstrip("\n")


def config_file_text(metadata_url: str | None = None, storage_uri: str | None = None) -> str:
    """The tidekeep.yaml a new workspace gets: the template, naming the metadata store and the storage
    root when they were given at creation. The home then is the workspace wherever it is opened from
    (the CLI with only --home / TIDEKEEP_HOME, or `tk.connect(home)`), not an embedded default that
    does not exist (docs/workspace.md)."""
    text = DEFAULT_CONFIG_TEXT
    if metadata_url is not None:
        assert _URL_TEMPLATE_LINE in text
        text = text.replace(_URL_TEMPLATE_LINE,
                            f"  url: {_yaml_scalar(metadata_url)}   # given when the workspace was created\n")
    if storage_uri is not None:
        assert _STORAGE_TEMPLATE_LINES in text
        text = text.replace(_STORAGE_TEMPLATE_LINES,
                            f"storage:   # given when the workspace was created\n  uri: {_yaml_scalar(storage_uri)}\n"
                            "  # fsync:")
    return text
