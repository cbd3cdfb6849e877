"""The `tidekeep` command: `tidekeep [root options] <noun> <verb> ...`.

Every tidekeep error ends the command with one line, `error: <message>`, on stderr and the
error's exit code (see tidekeep.errors); usage errors (unknown command, bad flag) exit 2 with
Typer's usage message. Any other exception is one line too: an operating-system failure gets the
code of its class (cli/failures.py), anything else is an internal error (exit 70); `--debug` or
`--verbose` adds its traceback. Ctrl-C prints `interrupted` and exits 130. No stack trace is shown
otherwise (docs/cli.md, "Errors and exit codes").
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from ..errors import INTERRUPTED_EXIT, StoreUnavailable, TidekeepError
from ..printable import printable
from ..redaction import redact
from ..spark import session as spark_session
from .context import GlobalOptions, parse_set_options
from .failures import describe
from .help_format import use_metavars_in_help
from .output import Output
from .server_options import ServerOptions

use_metavars_in_help()  # --help shows metavars, not <bool>/<str> (cli/help_format.py)

# The top-level commands in the order `tidekeep --help` lists them: name -> (module under
# tidekeep.cli, the attribute it is registered from, whether it is a noun's sub-app or one command).
COMMANDS: dict[str, tuple[str, str, bool]] = {
    "init": ("admin", "init", False),
    "sweep": ("admin", "sweep", False),
    "serve": ("serve", "serve_command", False),
    "api": ("serve", "api_command", False),
    "token": ("tokens", "app", True),
    "stream": ("streams", "app", True),
    "audit": ("audit", "app", True),
    "db": ("db", "app", True),
    "txn": ("txn", "app", True),
    "rg": ("rg", "app", True),
    "retention": ("retention", "app", True),
    "hold": ("holds", "app", True),
    "catalog": ("catalog", "app", True),
    "archives": ("archives", "app", True),
    "watermark": ("watermarks", "app", True),
    "config": ("config_show", "app", True),
}


def build_app(commands: Iterable[str] = COMMANDS) -> typer.Typer:
    """The tidekeep app with the root options and `commands` (default: all of them), importing only
    the modules those commands live in."""
    application = typer.Typer(
        name="tidekeep",
        help="Keep streaming and log data exactly as long as policy says.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,  # a genuine bug shows a plain traceback, never local variables
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    application.callback()(root)
    for name in commands:
        module_name, attribute, is_noun = COMMANDS[name]
        target = getattr(importlib.import_module(f"{__package__}.{module_name}"), attribute)
        if is_noun:
            application.add_typer(target, name=name)
        else:
            application.command(name)(target)
    return application


def app_for(args: Sequence[str]) -> typer.Typer:
    """The app that runs `args`: when they name a command, an app with the root options and that one
    command, so a command imports and builds only its own part of the tree (docs/cli.md, "Start-up
    time"); for the root's help, an unknown name or no command at all, the whole app, whose usage
    errors and suggestions see every command."""
    command = command_name(args)
    return build_app([command]) if command in COMMANDS else build_app()


def command_name(args: Sequence[str]) -> str | None:
    """The first argument after the root options, or None when a root option asks for help or none
    is given."""
    tokens = iter(args)
    for token in tokens:
        if token in _ROOT_VALUE_OPTIONS:
            next(tokens, None)
        elif token in ("-h", "--help"):
            return None
        elif not token.startswith("-"):
            return token
    return None


def __getattr__(name: str) -> Any:
    """`app`: the whole tidekeep app, built on first use (tests and documentation tools inspect it)."""
    if name == "app":
        application = build_app()
        globals()["app"] = application
        return application
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def root(
    ctx: typer.Context,
    home: Annotated[Path | None, typer.Option(
        "--home", metavar="PATH", help="Workspace directory [default: $TIDEKEEP_HOME or ./.tidekeep]")] = None,
    metadata_url: Annotated[str | None, typer.Option(
        "--metadata-url", metavar="URL", help="Metadata store (SQLAlchemy URL); overrides metadata.url")] = None,
    storage: Annotated[str | None, typer.Option(
        "--storage", metavar="URI", help="Data storage (path or pyarrow.fs URI); overrides storage.uri")] = None,
    settings: Annotated[list[str] | None, typer.Option(
        "--set", metavar="KEY=VALUE", help="Any setting, e.g. --set writer.batch_size=8MiB (repeatable)")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v",
        help="Show log messages at log.level on stderr, and the traceback of an internal error")] = False,
    debug: Annotated[bool, typer.Option(  # read by main() from the arguments: it must work before this runs
        "--debug", help="Show the traceback of an internal error")] = False,
    json_output: Annotated[bool, typer.Option(
        "--json", help="Print JSON instead of text, for every command (as each command's --json)")] = False,
    server: Annotated[str | None, typer.Option(
        "--server", metavar="URL", envvar="TIDEKEEP_SERVER", show_envvar=False,
        help="Run the command through this tidekeep API server, with the token in $TIDEKEEP_TOKEN or "
             "--token-file [default: $TIDEKEEP_SERVER]")] = None,
    token_file: Annotated[Path | None, typer.Option(
        "--token-file", metavar="PATH", help="With --server: read the token from this file (mode 600)")] = None,
    server_ca: Annotated[str | None, typer.Option(
        "--server-ca", metavar="PATH", envvar="TIDEKEEP_CA_BUNDLE", show_envvar=False,
        help="With --server: trust this CA bundle for its TLS certificate [default: $TIDEKEEP_CA_BUNDLE]")] = None,
) -> None:
    """Keep streaming and log data exactly as long as policy says.

    Settings: flags > TIDEKEEP_* environment > <home>/tidekeep.yaml > defaults.
    """
    remote = None if not server else ServerOptions(server, token_file, server_ca or None)
    ctx.obj = GlobalOptions(home, metadata_url, storage, parse_set_options(settings or []), verbose,
                            Output(json=json_output), remote)


# root options that take a value, skipped when looking for --debug before the command
_ROOT_VALUE_OPTIONS = frozenset({"--home", "--metadata-url", "--storage", "--set", "--server", "--token-file",
                                 "--server-ca"})
_TRACEBACK_FLAGS = frozenset({"--debug", "--verbose", "-v"})


def main(argv: Sequence[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    run(app_for(args), args)


def run(application: typer.Typer, args: list[str]) -> None:
    """Run `application` (the tidekeep app) on `args`, turning every failure into one line and an
    exit code from the documented table (SystemExit)."""
    debug = shows_traceback(args)
    previous_hook, spark_session.end_process_on_interrupt = spark_session.end_process_on_interrupt, _end_interrupted
    previous_announce, spark_session.announce_spark_ui = spark_session.announce_spark_ui, _announcer()
    try:
        application(args=args, prog_name="tidekeep")
    except TidekeepError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _interrupted()
    except SystemExit as exc:
        if exc.code == INTERRUPTED_EXIT:  # Typer's answer to KeyboardInterrupt inside a command
            _interrupted()
        raise
    except Exception as exc:
        if _is_store_refusal(exc):
            # the store is unreachable or refused us: an environment problem, reported, not a crash (the
            # store's own calls raise StoreUnavailable; this catches any path that reaches it directly)
            _fail(f"metadata store unavailable: {_first_line(getattr(exc, 'orig', None) or exc)}",
                  StoreUnavailable.exit_code)
        if debug:
            traceback.print_exc()
        _fail(*describe(exc))
    finally:
        spark_session.end_process_on_interrupt = previous_hook  # main(argv) may run inside a longer program
        spark_session.announce_spark_ui = previous_announce


def shows_traceback(args: Sequence[str]) -> bool:
    """Whether the root options (those before the command) ask for tracebacks."""
    tokens = iter(args)
    for token in tokens:
        if token in _TRACEBACK_FLAGS:
            return True
        if token in _ROOT_VALUE_OPTIONS:
            next(tokens, None)
        elif not token.startswith("-"):
            return False
    return False


def _announcer() -> Callable[[str], None]:
    """One `Spark UI: URL` line on stderr the first time a command's Spark session has its UI on
    (never on stdout, so --json output stays one document; docs/cli.md, "The Spark UI")."""
    shown: set[str] = set()

    def announce(url: str) -> None:
        if url not in shown:
            shown.add(url)
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(f"Spark UI: {printable(url)}\n")
                sys.stderr.flush()

    return announce


def _report_interrupted() -> None:
    with contextlib.suppress(OSError, ValueError):  # a closed pipe must not turn this into a traceback
        sys.stdout.flush()
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()


def _interrupted() -> NoReturn:
    _report_interrupted()
    raise SystemExit(INTERRUPTED_EXIT)


def _end_interrupted() -> NoReturn:
    """Ctrl-C during a Spark job: one line, and the process ends at once (spark/session.py says why)."""
    _report_interrupted()
    os._exit(INTERRUPTED_EXIT)


def _fail(message: str, code: int) -> None:
    sys.stdout.flush()
    # one line (echoed input cannot forge another) and never a password
    sys.stderr.write(f"error: {printable(redact(' '.join(message.split())))}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def _is_store_refusal(exc: Exception) -> bool:
    """A SQLAlchemy OperationalError, checked without importing SQLAlchemy: a command that never
    loaded it cannot have raised one, and `--help` must not pay for its import."""
    sqlalchemy_exc = sys.modules.get("sqlalchemy.exc")
    return sqlalchemy_exc is not None and isinstance(exc, sqlalchemy_exc.OperationalError)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


if __name__ == "__main__":
    main()
