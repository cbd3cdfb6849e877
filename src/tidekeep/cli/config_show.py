"""`tidekeep config show [KEY ...]`: the effective settings, where each came from, secrets masked."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..config import CONFIG_FILE, CONFIG_FILE_NAME, FLAG, KEYS, Settings, did_you_mean, value_kind
from ..errors import ConfigError
from ..redaction import redact_value
from ..units import format_duration
from .context import GlobalOptions, load, options
from .output import emit_json, emit_table, fields

JsonFlag = Annotated[bool, typer.Option("--json", help="Print a JSON document instead of text")]

_SIZE_UNITS = (("GiB", 1 << 30), ("GB", 10**9), ("MiB", 1 << 20), ("MB", 10**6), ("KiB", 1 << 10), ("KB", 1000))


def exact_size(n: int) -> str:
    """A byte count in the largest unit that holds it exactly (4MiB, 256MB), as settings are written."""
    for unit, factor in _SIZE_UNITS:
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


def effective_value(settings: Settings, key: str) -> Any:
    """What the workspace uses: the defaults of metadata.url and storage.uri are the paths they
    stand for; URL passwords and secret parameters are masked."""
    value = {"metadata.url": settings.metadata_url, "storage.uri": settings.storage_uri}.get(key, settings[key])
    return redact_value(value)


def shown_value(key: str, value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ", ".join(value) if value else "(none)"
    kind = value_kind(key)
    if kind == "duration" and isinstance(value, int):
        return format_duration(value)
    if kind == "size" and isinstance(value, int):
        return exact_size(value)
    return str(value)


def flag_name(opts: GlobalOptions, key: str) -> str:
    """Which flag set `key`: the dedicated flags win over --set (GlobalOptions.overrides)."""
    if key == "metadata.url" and opts.metadata_url is not None:
        return "--metadata-url"
    if key == "storage.uri" and opts.storage is not None:
        return "--storage"
    return "--set"


def register(config_app: typer.Typer) -> None:
    @config_app.command("show")
    def show(
        ctx: typer.Context,
        keys: Annotated[list[str] | None, typer.Argument(
            metavar="[KEY]...", help="Only these settings (dotted names, e.g. writer.batch_size)",
            show_default=False)] = None,
        json_output: JsonFlag = False,
    ) -> None:
        """Print the effective settings and where each came from (default, tidekeep.yaml, environment,
        flag); passwords in URLs are masked. Needs no workspace: it shows what a command would use."""
        for key in keys or []:
            if key not in KEYS:
                raise ConfigError(f"unknown setting {key!r}{did_you_mean(key, KEYS)}")
        settings = load(ctx)
        opts = options(ctx)
        rows: list[dict[str, Any]] = []
        for key in keys or list(KEYS):
            source = settings.source(key)
            origin = flag_name(opts, key) if source.kind == FLAG else source.origin
            value = effective_value(settings, key)
            rows.append({"key": key, "value": list(value) if isinstance(value, tuple) else value,
                         "source": source.kind, "origin": origin or None})
        if json_output:
            emit_json({"home": str(settings.home.resolve()),
                       "config_file": str((settings.home / CONFIG_FILE_NAME).resolve()), "settings": rows})
            return
        fields([("home", str(settings.home.resolve())),
                ("config", str((settings.home / CONFIG_FILE_NAME).resolve()))])
        emit_table(["KEY", "VALUE", "SOURCE"], [
            [row["key"], shown_value(row["key"], effective_value(settings, row["key"])),
             row["source"] + (f" ({row['origin']})" if row["origin"] and row["source"] != CONFIG_FILE else "")]
            for row in rows])
