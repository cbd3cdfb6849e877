"""`tidekeep config show [KEY ...]`: the effective settings, where each came from, secrets masked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import ConfigError
from ..redaction import redact_value
from ..units import format_duration
from .context import GlobalOptions, load, options, output
from .options import JsonDocumentFlag
from .output import emit_table, fields

if TYPE_CHECKING:
    from ..config import Settings

app = typer.Typer(help="Settings: the effective values and where each came from.", no_args_is_help=True)

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
    from ..config import value_kind

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ", ".join(value) if value else "(none)"
    if isinstance(value, dict):  # spark.conf
        return ", ".join(f"{name}={item}" for name, item in value.items()) if value else "(none)"
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


def setting_rows(settings: Settings, opts: GlobalOptions, keys: list[str]) -> list[dict[str, Any]]:
    from ..config import FLAG

    rows = []
    for key in keys:
        source = settings.source(key)
        origin = flag_name(opts, key) if source.kind == FLAG else source.origin
        value = effective_value(settings, key)
        rows.append({"key": key, "value": list(value) if isinstance(value, tuple) else value,
                     "source": source.kind, "origin": origin or None})
    return rows


def emit_settings(settings: Settings, rows: list[dict[str, Any]]) -> None:
    from ..config import CONFIG_FILE, CONFIG_FILE_NAME

    fields([("home", str(settings.home.resolve())),
            ("config", str((settings.home / CONFIG_FILE_NAME).resolve()))])
    emit_table(["KEY", "VALUE", "SOURCE"], [
        [row["key"], shown_value(row["key"], effective_value(settings, row["key"])),
         row["source"] + (f" ({row['origin']})" if row["origin"] and row["source"] != CONFIG_FILE else "")]
        for row in rows])


@app.command("show")
def show(
    ctx: typer.Context,
    keys: Annotated[list[str] | None, typer.Argument(
        metavar="[KEY]...", help="Only these settings (dotted names, e.g. writer.batch_size)",
        show_default=False)] = None,
    json_output: JsonDocumentFlag = False,
) -> None:
    """Print the effective settings and where each came from (default, tidekeep.yaml, environment,
    flag); passwords in URLs are masked. Needs no workspace: it shows what a command would use."""
    from ..config import CONFIG_FILE_NAME, KEYS, did_you_mean

    for key in keys or []:
        if key not in KEYS:
            raise ConfigError(f"unknown setting {key!r}{did_you_mean(key, KEYS)}")
    settings = load(ctx)
    rows = setting_rows(settings, options(ctx), keys or list(KEYS))
    output(ctx, json_output).show(
        {"home": str(settings.home.resolve()), "config_file": str((settings.home / CONFIG_FILE_NAME).resolve()),
         "settings": rows},
        lambda: emit_settings(settings, rows))
