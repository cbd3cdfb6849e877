"""Settings: defaults < tidekeep.yaml < TIDEKEEP_* environment < flags, validated on load.

Every key has one dotted name (`writer.batch_size`), used in YAML (nested), in the environment
(`TIDEKEEP_WRITER_BATCH_SIZE`) and in flags (`--set writer.batch_size=8MiB`). Unknown keys are
rejected with the key named and the closest known one suggested, so a typo never silently falls
back to a default. Settings remember where each value came from (`tidekeep config show`).

The keys are the fields of one pydantic-settings model, `TidekeepSettings` (type, default, help
and validator of each); pydantic-settings layers the sources and validates the result. Each layer
is also validated on its own, so that every error names the key and the layer it came from (a bad
value in tidekeep.yaml is an error even when a flag sets the same key) in one line.
"""

from __future__ import annotations

import difflib
import itertools
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BeforeValidator, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .errors import ConfigError, InvalidInput
from .spark_conf import parse_spark_conf
from .units import parse_duration_ms, parse_minutes, parse_size_bytes
from .uri_credentials import CREDENTIALS_CHAIN, credentials_in_uri, is_credential_setting

CONFIG_FILE_NAME = "tidekeep.yaml"
DEFAULT_HOME = ".tidekeep"
MAX_EVENT_SIZE = 8 * 1024 * 1024

# Environment variables with the TIDEKEEP_ prefix that are not settings.
# TIDEKEEP_METADATA_PASSWORD: how Spark executors get the metadata password (spark/credentials.py)
_ENV_NOT_SETTINGS = {"TIDEKEEP_HOME", "TIDEKEEP_FAULT", "TIDEKEEP_FAULT_RAISE", "TIDEKEEP_PAUSE",
                     "TIDEKEEP_METADATA_PASSWORD",
                     # the CLI's --server mode (cli/remote.py): where the API is, the token, a private CA
                     "TIDEKEEP_SERVER", "TIDEKEEP_TOKEN", "TIDEKEEP_CA_BUNDLE"}
_ENV_IGNORED_PREFIXES = ("TIDEKEEP_TEST_",)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"expected a non-empty string, got {value!r}")
    return value.strip()


def _optional_text(value: Any) -> str | None:
    return None if value is None or value == "" else _text(value)


def parse_listen(value: Any) -> tuple[str, int]:
    """"HOST:PORT" ("[::1]:8620" for IPv6) as a host and a port in 1..65535."""
    text = _text(value)
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput(f"expected HOST:PORT with a port in 1..65535, like 127.0.0.1:8620, got {value!r}")
    return host, int(port)


def _listen(value: Any) -> str:
    parse_listen(value)
    return _text(value)


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


MAX_CHUNK_TARGET_SIZE = 1024 * 1024 * 1024  # a merge holds its group in memory, as a read holds a chunk


def chunk_target_size(value: Any) -> int:
    """A compaction target size (chunks.target_size, `stream compact --target-size`): a size from
    1 byte to 1 GiB."""
    size = parse_size_bytes(value)
    if not 0 < size <= MAX_CHUNK_TARGET_SIZE:
        raise InvalidInput(f"invalid target size {value!r}: must be greater than zero and at most 1GiB")
    return size


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
    from .cron import check_cron  # on use: the settings module stays import-light

    return check_cron(value)


def _data_roots(value: Any) -> tuple[str, ...]:
    """Absolute paths or URIs, as a YAML list or a comma-separated string, each in its normal form
    followed by its pyarrow options, if any (a URI's query; docs/catalog-purge.md); repeats are
    dropped; credentials are refused, as in storage.uri. Whether they overlap tidekeep's own areas depends
    on other keys, so load_settings checks that once every key is known."""
    from .places import Refused, parse_absolute, split_options  # on use, as _cron
    from .uri_credentials import CREDENTIALS_CHAIN, credentials_in_uri

    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise InvalidInput(f"expected a list of absolute paths or URIs, got {value!r}")
    roots: list[str] = []
    options_of: dict[str, str] = {}  # a root's place (normal form) -> its options
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise InvalidInput(f"expected absolute paths or URIs, got the entry {item!r}")
        carried = credentials_in_uri(item.strip())
        if carried is not None:  # the entry is not shown: it holds the secret
            raise InvalidInput(f"an entry carries credentials ({carried}); {CREDENTIALS_CHAIN}")
        try:
            root, options = split_options(item.strip())
            place = parse_absolute(root)
        except Refused as exc:
            raise InvalidInput(f"{item.strip()!r} {exc}") from None
        # the options (pyarrow's, for the purge to reach the store) stay with the root's normal form;
        # one root with two sets of them would leave open which store its records are on
        if options_of.setdefault(place.uri, options) != options:
            raise InvalidInput(f"{place.uri!r} is given twice with different options")
        normal = f"{place.uri}?{options}" if options else place.uri
        if normal not in roots:
            roots.append(normal)
    return tuple(roots)


_T = TypeVar("_T")


def _checked(parse: Callable[[Any], _T]) -> BeforeValidator:
    """A pydantic validator running one of the parsers above; its InvalidInput becomes the
    validation error's message as it is (no "Value error, " prefix), for the one-line errors."""

    def validate(value: Any) -> _T:
        try:
            return parse(value)
        except InvalidInput as exc:
            raise PydanticCustomError("tidekeep_setting", "{reason}", {"reason": str(exc)}) from None

    return BeforeValidator(validate)


Text = Annotated[str, _checked(_text)]
OptionalText = Annotated[str | None, _checked(_optional_text)]
Level = Annotated[str, _checked(_level)]
Listen = Annotated[str, _checked(_listen)]
Flag = Annotated[bool, _checked(_flag)]
Boolean = Annotated[bool, _checked(_boolean)]
Duration = Annotated[int, _checked(parse_duration_ms)]
PositiveDuration = Annotated[int, _checked(_positive(parse_duration_ms))]
PositiveSize = Annotated[int, _checked(_positive(parse_size_bytes))]
ChunkTargetSize = Annotated[int, _checked(chunk_target_size)]
PositiveCount = Annotated[int, _checked(_positive(_count))]
NonNegativeCount = Annotated[int, _checked(_non_negative)]
Minutes = Annotated[int, _checked(_minutes)]
MinutesOrNull = Annotated[int | None, _checked(_minutes_or_null)]
CronSchedule = Annotated[str, _checked(_cron)]
DataRoots = Annotated[tuple[str, ...], _checked(_data_roots)]
SparkConf = Annotated[dict[str, str], _checked(parse_spark_conf)]


def _key(key: str, default: Any, help: str) -> Any:
    """A setting's field: its dotted key is the alias (the field name is the key with "_" for ".")."""
    return Field(default, alias=key, description=help)


class TidekeepSettings(BaseSettings):
    """Every setting: field `writer_batch_size` is the key `writer.batch_size` (the dotted keys are
    the aliases). The layers are given per load by `load_settings` (see `_layer_sources`)."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, validate_by_alias=True, validate_by_name=False,
                                      validate_default=False)

    metadata_url: OptionalText = _key("metadata.url", None, "SQLAlchemy URL; default: SQLite file <home>/metadata.db")
    metadata_busy_timeout: PositiveDuration = _key("metadata.busy_timeout", 30_000, "SQLite busy timeout")
    storage_uri: OptionalText = _key("storage.uri", None, "pyarrow.fs URI or path for data; default: <home>/data")
    storage_fsync: Flag = _key(
        "storage.fsync", True,
        "fsync local data files and their directories before the metadata commit that names them, and commit "
        "SQLite with synchronous=FULL")
    spark_master: Text = _key("spark.master", "local[*]", "Spark master URL")
    spark_app_name: Text = _key("spark.app_name", "tidekeep", "Spark application name")
    spark_remote: OptionalText = _key(
        "spark.remote", None,
        "Spark Connect server (sc://host:port) every Spark job runs on instead of a JVM started here; "
        "default: the SPARK_REMOTE environment variable, else none")
    spark_shared_filesystem: Boolean = _key(
        "spark.shared_filesystem", False,
        "every Spark executor sees the driver's files at the same paths (so a SQLite metadata file and local "
        "storage work with a non-local master)")
    spark_ui: Boolean = _key(
        "spark.ui", True,
        "start the Spark UI with the Spark sessions tidekeep starts (on a loopback address with a local master; "
        "with a cluster master only when SPARK_LOCAL_IP names its address); "
        "long commands print its URL on stderr")
    spark_conf: SparkConf = _key(
        "spark.conf", {},
        "Spark confs passed to the Spark sessions tidekeep starts, e.g. {spark.driver.memory: 4g}; tidekeep's own "
        "confs and secret-bearing ones are refused")
    writer_batch_size: PositiveSize = _key("writer.batch_size", 4 * 1024 * 1024, "flush a segment batch at this size")
    writer_linger: Duration = _key("writer.linger", 100, "flush pending events after this long")
    chunks_target_size: ChunkTargetSize = _key(
        "chunks.target_size", 8 * 1024 * 1024,
        "compaction merges a segment's adjacent chunks below this size into chunks of at most this size")
    chunks_compaction_interval: Duration = _key(
        "chunks.compaction_interval", 600_000,
        "how often `tidekeep serve` compacts every stream's small chunks (0: never)")
    sweep_grace: Duration = _key("sweep.grace", 3_600_000, "uncommitted chunk files younger than this are never swept")
    retention_frequency: PositiveDuration = _key("retention.frequency", 30 * 60_000, "retention cycle spacing")
    watermark_frequency: PositiveDuration = _key(
        "watermark.frequency", 1_000,
        "how often `tidekeep serve` computes the watermarks of streams with recent marks")
    log_level: Level = _key("log.level", "INFO", "log level")
    api_listen: Listen = _key(
        "api.listen", "127.0.0.1:8620",
        "HOST:PORT of the HTTP API under `tidekeep serve` and `tidekeep api` (docs/api.md)")
    api_auth: Boolean = _key(
        "api.auth", True,
        "require a token on every API request; false only on a loopback address (docs/security.md)")
    api_dashboard: Boolean = _key(
        "api.dashboard", True,
        "serve the web dashboard at / beside the API, behind the same tokens (docs/dashboard.md)")
    api_tls_cert: OptionalText = _key("api.tls_cert", None, "PEM certificate file: the API speaks HTTPS")
    api_tls_key: OptionalText = _key("api.tls_key", None, "PEM private key file of api.tls_cert")
    api_metrics_interval: PositiveDuration = _key(
        "api.metrics_interval", 15_000,
        "how often the store-wide figures of /metrics are read again (not on every scrape)")
    catalog_slice_rows: PositiveCount = _key(
        "catalog.slice_rows", 100_000,
        "candidate records per slice: one statement in the database (create-time slices)")
    catalog_parallelism: NonNegativeCount = _key(
        "catalog.parallelism", 0,
        "PostgreSQL: at most this many slices at once, one connection each (0: as many as Spark runs)")
    catalog_schedule: CronSchedule = _key(
        "catalog.schedule", "0 0 * * *",
        "cron schedule (UTC) of the catalog job under `tidekeep serve`")
    catalog_purge_age: Duration = _key(
        "catalog.purge_age", 7 * 86_400_000,
        "records DELETED for longer than this have their data purged")
    catalog_purge_batch_size: PositiveCount = _key("catalog.purge_batch_size", 1000, "records purged per batch")
    catalog_purge_failure_threshold: NonNegativeCount = _key(
        "catalog.purge_failure_threshold", 100,
        "the purge stops after more failures than this")
    catalog_data_roots: DataRoots = _key(
        "catalog.data_roots", (),
        "absolute paths or URIs under which records may name their data; relative locations are under the "
        "storage root")
    # archives: CLP's keys, units (minutes) and defaults (docs/design/archives.md#collectors)
    archive_output_retention_period: MinutesOrNull = _key(
        "archive_output.retention_period", None,
        "archive retention in minutes after the archive's newest log timestamp; null keeps archives forever")
    results_cache_retention_period: MinutesOrNull = _key(
        "results_cache.retention_period", 60,
        "search results are deleted this many minutes after their search ended; null keeps them forever")
    garbage_collector_sweep_interval_archive: Minutes = _key(
        "garbage_collector.sweep_interval.archive", 60,
        "minutes between archive collector sweeps")
    garbage_collector_sweep_interval_search_result: Minutes = _key(
        "garbage_collector.sweep_interval.search_result", 30,
        "minutes between search-result collector sweeps")
    garbage_collector_logging_level: Level = _key(
        "garbage_collector.logging_level", "INFO",
        "log level of the garbage collectors")
    search_max_runtime: PositiveDuration = _key(
        "search.max_runtime", 3_600_000,
        "a search RUNNING longer than this is marked KILLED by the archive collector")
    search_heartbeat_interval: PositiveDuration = _key(
        "search.heartbeat_interval", 10_000,
        "a running search writes its heartbeat this often; one silent for 3 intervals is marked FAILED by the "
        "archive collector")
    archives_target_size: PositiveSize = _key(
        "archives.target_size", 256 * 1000 * 1000,
        "an archive file is closed once its stored (compressed) size reaches this")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   *other_sources: Any, **named_sources: Any) -> tuple[PydanticBaseSettingsSource, ...]:
        """Values given to the constructor (`model_validate` too), then tidekeep's layers of the load
        under way, highest first. pydantic-settings' own environment and dotenv readers are left
        out: tidekeep reads TIDEKEEP_* itself, to refuse unknown names and name a bad one."""
        layers = tuple(_LayerSource(settings_cls, {k: v for k, v in layer.values.items() if k in KEYS})
                       for layer in reversed(_LAYERS.get()))
        return (init_settings, *layers)


for _name, _info in TidekeepSettings.model_fields.items():  # one spelling of each key, checked once
    if _info.alias is None or _info.alias.replace(".", "_") != _name:
        raise AssertionError(f"setting field {_name} must have its dotted key as its alias")


@dataclass(frozen=True)
class _Key:
    """One setting as `tidekeep config show` and the docs see it."""

    parse: Callable[[Any], Any]
    default: Any
    help: str


def _field_parser(key: str) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        """The key's validator alone: its value, or InvalidInput with the reason."""
        try:
            model = TidekeepSettings.model_validate({key: value})
        except ValidationError as exc:
            raise InvalidInput(exc.errors()[0]["msg"]) from None
        return getattr(model, key.replace(".", "_"))

    return parse


def _spec(key: str, info: FieldInfo) -> _Key:
    return _Key(_field_parser(key), info.default, info.description or "")


KEYS: dict[str, _Key] = {info.alias or name: _spec(info.alias or name, info)
                         for name, info in TidekeepSettings.model_fields.items()}


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


@dataclass(frozen=True)
class _Layer:
    """One layer's raw values by dotted key, and where they came from."""

    values: Mapping[str, Any]
    source: Source

    @property
    def where(self) -> str:
        return source_text(self.source)


class _LayerSource(PydanticBaseSettingsSource):
    """One tidekeep layer as a pydantic-settings source (its values were checked on their own)."""

    def __init__(self, settings_cls: type[BaseSettings], values: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self.values = dict(values)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        key = field.alias or field_name
        return self.values.get(key), key, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.values)


# the layers of the load under way, lowest first: pydantic-settings asks the settings class for its
# sources, so a load hands them over here (a context variable: loads in other threads do not mix)
_LAYERS: ContextVar[tuple[_Layer, ...]] = ContextVar("tidekeep_settings_layers", default=())


@contextmanager
def _loading(layers: tuple[_Layer, ...]) -> Iterator[None]:
    token = _LAYERS.set(layers)
    try:
        yield
    finally:
        _LAYERS.reset(token)


# Settings that no longer do anything: accepted with a warning, so a tidekeep.yaml written by an
# older `tidekeep init` still loads (docs/configuration.md)
RETIRED_SETTINGS = {
    "catalog.delete_batch_size": "the catalog job now works in slices of 'catalog.slice_rows' candidates",
    "catalog.partitions": "the catalog job now runs one Spark task per slice ('catalog.parallelism' bounds them)",
}
_warned_retired: set[str] = set()


def _warn_retired(key: str, where: str) -> None:
    if key not in _warned_retired:
        _warned_retired.add(key)
        logging.getLogger("tidekeep.config").warning("setting %r in %s is no longer used and is ignored: %s",
                                                     key, where, RETIRED_SETTINGS[key])


def _checked_layer(layer: _Layer) -> dict[str, Any]:
    """The layer's values parsed, each key checked on its own; ConfigError naming the first unknown
    or bad key (in the layer's order) and the layer."""
    known = {key: value for key, value in layer.values.items() if key in KEYS}
    problems: dict[str, str] = {}
    try:
        model = TidekeepSettings.model_validate(known)
    except ValidationError as exc:
        for error in exc.errors():
            problems.setdefault(str(error["loc"][0]) if error["loc"] else "", error["msg"])
    for key in layer.values:
        if key in RETIRED_SETTINGS:
            _warn_retired(key, layer.where)
            continue
        if key not in KEYS and is_credential_setting(key):  # named, its value never shown
            raise ConfigError(f"setting {key!r} in {layer.where} is refused: {CREDENTIALS_CHAIN}")
        if key not in KEYS:
            # a misspelt section ("writr") is compared with the sections, a misspelt key with the keys
            raise ConfigError(f"unknown setting {key!r} in {layer.where}{did_you_mean(key, [*KEYS, *_SECTIONS])}")
        carried = credentials_in_uri(layer.values[key]) if key == "storage.uri" and isinstance(
            layer.values[key], str) else None
        if carried is not None:
            raise ConfigError(f"bad value for 'storage.uri' in {layer.where}: it carries credentials ({carried}); "
                              f"{CREDENTIALS_CHAIN}")
        if key in problems:
            raise ConfigError(f"bad value for {key!r} in {layer.where}: {problems[key]}")
    if problems:  # not expected: every error is at a key of the layer
        raise ConfigError(f"bad settings in {layer.where}: {next(iter(problems.values()))}")
    return {key: getattr(model, key.replace(".", "_")) for key in layer.values if key in KEYS}


def _file_values(path: Path) -> dict[str, Any]:
    """The raw settings in a tidekeep.yaml by dotted key; {} when the file does not exist."""
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
    return _flatten(data)


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings in a tidekeep.yaml, validated; {} when the file does not exist."""
    return _checked_layer(_Layer(_file_values(path), Source(CONFIG_FILE, str(path))))


def _env_layers(env: Mapping[str, str]) -> Iterator[_Layer]:
    """One layer per TIDEKEEP_* variable that is a setting (each names its own variable), in the
    environment's order; ConfigError at the first unknown one."""
    for name, raw in env.items():
        if not name.startswith("TIDEKEEP_") or name in _ENV_NOT_SETTINGS or name.startswith(_ENV_IGNORED_PREFIXES):
            continue
        if name not in _ENV_TO_KEY:
            raise ConfigError(f"unknown setting in environment variable {name}"
                              f"{did_you_mean(name, [*_ENV_TO_KEY, *_ENV_NOT_SETTINGS])}")
        yield _Layer({_ENV_TO_KEY[name]: raw}, Source(ENVIRONMENT, name))


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
    config_path = home_path / CONFIG_FILE_NAME
    flags = {key: raw for key, raw in (overrides or {}).items() if raw is not None}  # None: flag not given
    layers: list[_Layer] = []
    for layer in itertools.chain([_Layer(_file_values(config_path), Source(CONFIG_FILE, str(config_path)))],
                                 _env_layers(env), [_Layer(flags, Source(FLAG))]):
        _checked_layer(layer)  # every layer valid on its own, even where a higher one sets the same key
        layers.append(layer)
    with _loading(tuple(layers)):
        try:
            model = TidekeepSettings()
        except ValidationError as exc:  # not expected: each layer passed alone
            raise ConfigError(f"bad settings: {exc.errors()[0]['msg']}") from None
    values = model.model_dump(by_alias=True)
    # the highest layer wins
    sources = {key: layer.source for layer in layers for key in layer.values if key in KEYS}
    # relative paths are taken against this process's working directory, now: Spark executors and
    # the Python workers Spark plans in run elsewhere, and would resolve them against their own
    if values["metadata.url"] is not None:
        values["metadata.url"] = absolute_metadata_url(values["metadata.url"])
    if values["storage.uri"] is not None:
        values["storage.uri"] = absolute_storage_uri(values["storage.uri"])
    settings = Settings(home=home_path, values=values, sources=sources)
    if values["catalog.data_roots"]:
        from .workspace_areas import data_root_problem  # on use: only when data roots are set

        problem = data_root_problem(values["catalog.data_roots"], settings.storage_uri, settings.metadata_url,
                                    str(home_path / CONFIG_FILE_NAME))
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
  ui: true                   # the Spark UI, on 127.0.0.1 with a local master; long commands print its URL
  # conf:                    # Spark confs for the sessions tidekeep starts (never a secret)
  #   spark.driver.memory: 4g
writer:
  batch_size: 4MiB
  linger: 100ms
chunks:
  target_size: 8MiB          # compaction merges adjacent smaller chunks into chunks of at most this size
  compaction_interval: 10m   # under `tidekeep serve` (0: never); `tidekeep stream compact` any time
sweep:
  grace: 1h                  # also how long a file compaction replaced stays for readers that planned it
retention:
  frequency: 30m
watermark:
  frequency: 1s              # watermarks of streams whose writers note time, under `tidekeep serve`
catalog:
  slice_rows: 100000         # candidate records per slice of the retention job (one statement each)
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
