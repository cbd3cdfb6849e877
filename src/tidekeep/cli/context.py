"""The root options (--home, --metadata-url, --storage, --set, --verbose, --server) and opening the
workspace, or with --server the API server that stands for it (cli/remote.py).

Settings are layered by tidekeep.config.load_settings: defaults < tidekeep.yaml < TIDEKEEP_* env
< these flags. Nothing is loaded until a command needs it, so `--help` works even when the
configuration is broken; nor imported: the settings, the client and the store load inside the
functions below, so that `--help` never imports them (docs/cli.md, "Start-up time").
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import ConfigError, InvalidInput, NotFound
from ..printable import PrintableFormatter
from ..redaction import RedactingFilter
from ..store.deletion import in_result
from .output import Output
from .server_options import ServerOptions

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Settings
    from .remote import Remote


@dataclass(frozen=True)
class GlobalOptions:
    home: Path | None = None
    metadata_url: str | None = None
    storage: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    verbose: bool = False
    output: Output = field(default_factory=Output)  # text, or JSON with the root's --json
    server: ServerOptions | None = None  # commands go through this API server, not the workspace

    def overrides(self) -> dict[str, str]:
        """Flag-level settings: --set pairs, then the dedicated flags, which win over --set."""
        merged = dict(self.settings)
        if self.metadata_url is not None:
            merged["metadata.url"] = self.metadata_url
        if self.storage is not None:
            merged["storage.uri"] = self.storage
        return merged


def parse_set_options(items: Sequence[str]) -> dict[str, str]:
    """--set KEY=VALUE pairs; the keys are checked against config.KEYS when settings load."""
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"bad --set {item!r}: expected KEY=VALUE, e.g. --set writer.batch_size=8MiB")
        pairs[key.strip()] = value
    return pairs


def options(ctx: typer.Context) -> GlobalOptions:
    root = ctx.find_root()
    return root.obj if isinstance(root.obj, GlobalOptions) else GlobalOptions()


def output(ctx: typer.Context, json_flag: bool = False) -> Output:
    """The output the root chose, or JSON when the command's own --json flag is given."""
    return Output(json=True) if json_flag else options(ctx).output


def is_remote(ctx: typer.Context) -> bool:
    """Whether the command goes through an API server (--server or TIDEKEEP_SERVER)."""
    return options(ctx).server is not None


def refuse_remote(ctx: typer.Context) -> None:
    """With --server, a command that only works on the workspace says so in one line, instead of
    quietly opening whatever workspace the local settings name."""
    if is_remote(ctx):
        raise InvalidInput(f"`{ctx.command_path}` is not available with --server; run it where the workspace "
                           "is (without --server and TIDEKEEP_SERVER)")


@contextlib.contextmanager
def open_remote(ctx: typer.Context) -> Iterator[Remote]:
    """The API server the options name, with the token of --token-file or TIDEKEEP_TOKEN."""
    import os

    from .remote import Remote, read_token

    server = options(ctx).server
    if server is None:
        raise InvalidInput(f"`{ctx.command_path}` needs --server URL or TIDEKEEP_SERVER")
    remote = Remote(server, read_token(server, os.environ))
    try:
        yield remote
    finally:
        remote.close()


def load(ctx: typer.Context) -> Settings:
    from ..config import load_settings

    refuse_remote(ctx)
    opts = options(ctx)
    return load_settings(opts.home, opts.overrides())


def require_workspace(settings: Settings) -> None:
    """Refuse to conjure a workspace out of a typo: the embedded defaults put the database and
    data inside the home directory, so that home must have been set up by `tidekeep init`."""
    from ..config import CONFIG_FILE_NAME

    uses_home = settings["metadata.url"] is None or settings["storage.uri"] is None
    if uses_home and not (settings.home / CONFIG_FILE_NAME).is_file():
        raise NotFound(f"no tidekeep workspace at {str(settings.home)!r} (no {CONFIG_FILE_NAME}); run "
                       "'tidekeep init' first, or point --home / TIDEKEEP_HOME at a workspace")


def configure_logging(settings: Settings, verbose: bool) -> None:
    """tidekeep logs to stderr. Without --verbose only warnings and errors show, so stdout and
    stderr stay clean for scripts; with it, messages at the configured log.level show too."""
    level = logging.getLevelName(settings["log.level"]) if verbose else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PrintableFormatter("%(levelname)s %(name)s: %(message)s"))
    # on the handler too: a module logger with a level of its own (the garbage collectors'
    # garbage_collector.logging_level) must not print INFO lines next to a command's own output
    handler.setLevel(level)
    # an operation that could not delete some files logs a warning naming them, and its result names
    # them too; the command prints that result's `warning:` line, so the log record would say it twice
    handler.addFilter(lambda record: not in_result(record))
    handler.addFilter(RedactingFilter())  # no password in any log line, at any level
    logger = logging.getLogger("tidekeep")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False


@contextlib.contextmanager
def open_client(ctx: typer.Context, spark_job: Callable[[Settings], None] | None = None) -> Iterator[Client]:
    """The client of the workspace the options name. `spark_job`: the command runs a Spark job, and
    this refuses on the settings what the job would (spark/session.py `check_job_reach`) before the
    workspace opens: opening migrates a store an older tidekeep left, and a refused command changes
    nothing."""
    from ..client import Client

    settings = load(ctx)
    require_workspace(settings)
    configure_logging(settings, options(ctx).verbose)
    if spark_job is not None:
        spark_job(settings)
    client = Client(settings)
    try:
        yield client
    finally:
        client.close()
