"""The `tidekeep` command: `tidekeep [root options] <noun> <verb> ...`.

Every tidekeep error ends the command with one line, `error: <message>`, on stderr and the
error's exit code (see tidekeep.errors); usage errors (unknown command, bad flag) exit 2 with
Typer's usage message. No stack trace is shown for bad input.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import sqlalchemy as sa
import typer

from ..errors import StoreUnavailable, TidekeepError
from ..printable import printable
from ..redaction import redact
from . import (
    admin,
    archives_gc,
    archives_ingest,
    archives_search,
    audit,
    catalog_job,
    catalog_purge,
    catalog_records,
    catalog_rules,
    config_show,
    holds,
    rg,
    serve,
    stream_data,
    streams,
    subscribers,
    txn,
)
from . import retention as retention_cli
from . import watermarks as watermarks_cli
from .context import GlobalOptions, parse_set_options
from .help_format import use_metavars_in_help

use_metavars_in_help()  # --help shows metavars, not <bool>/<str> (cli/help_format.py)
app = typer.Typer(
    name="tidekeep",
    help="Keep streaming and log data exactly as long as policy says.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # a genuine bug shows a plain traceback, never local variables
    context_settings={"help_option_names": ["-h", "--help"]},
)

stream_app = typer.Typer(help="Create, scale, write, read and truncate streams.", no_args_is_help=True)
audit_app = typer.Typer(help="The audit trail: every deletion, why, how much, by whom.", no_args_is_help=True)
db_app = typer.Typer(help="The metadata database.", no_args_is_help=True)
txn_app = typer.Typer(help="Transactions of transactional writers.", no_args_is_help=True)
rg_app = typer.Typer(help="Reader groups: shared reading, positions and checkpoints.", no_args_is_help=True)
retention_app = typer.Typer(help="Size and time retention: preview, run and history of cycles.",
                            no_args_is_help=True)
hold_app = typer.Typer(help="Legal holds: a held stream is never truncated; held catalog records are never deleted.",
                       no_args_is_help=True)
archives_app = typer.Typer(help="Log archives: ingest logs with Spark, search them, expire archives and results.",
                            no_args_is_help=True)
watermark_app = typer.Typer(help="Watermarks: writers' time marks and the watermarks readers' time windows come from.",
                            no_args_is_help=True)
catalog_app = typer.Typer(help="The catalog: meta records, retention rules, the retention job and purge.",
                          no_args_is_help=True)
config_app = typer.Typer(help="Settings: the effective values and where each came from.", no_args_is_help=True)

streams.register(stream_app)
stream_data.register(stream_app)
retention_cli.register_policy(stream_app)
retention_cli.register(retention_app)
subscribers.register(retention_app)
audit.register(audit_app)
admin.register(app, db_app)
txn.register(txn_app)
rg.register(rg_app)
rg.register_reset(rg_app)
serve.register(app)
holds.register(hold_app)
catalog_records.register(catalog_app)
catalog_rules.register(catalog_app)
catalog_job.register(catalog_app)
catalog_purge.register(catalog_app)
archives_ingest.register(archives_app)
archives_search.register(archives_app)
archives_gc.register(archives_app)
watermarks_cli.register(watermark_app)
config_show.register(config_app)
app.add_typer(stream_app, name="stream")
app.add_typer(audit_app, name="audit")
app.add_typer(db_app, name="db")
app.add_typer(txn_app, name="txn")
app.add_typer(rg_app, name="rg")
app.add_typer(retention_app, name="retention")
app.add_typer(hold_app, name="hold")
app.add_typer(catalog_app, name="catalog")
app.add_typer(archives_app, name="archives")
app.add_typer(watermark_app, name="watermark")
app.add_typer(config_app, name="config")


@app.callback()
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
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show log messages at log.level on stderr")] = False,
) -> None:
    """Keep streaming and log data exactly as long as policy says.

    Settings: flags > TIDEKEEP_* environment > <home>/tidekeep.yaml > defaults.
    """
    ctx.obj = GlobalOptions(home, metadata_url, storage, parse_set_options(settings or []), verbose)


def main(argv: Sequence[str] | None = None) -> None:
    try:
        app(args=None if argv is None else list(argv), prog_name="tidekeep")
    except TidekeepError as exc:
        _fail(str(exc), exc.exit_code)
    except sa.exc.OperationalError as exc:
        # the store is unreachable or refused us: an environment problem, reported, not a crash (the
        # store's own calls raise StoreUnavailable; this catches any path that reaches it directly)
        _fail(f"metadata store unavailable: {_first_line(exc.orig or exc)}", StoreUnavailable.exit_code)


def _fail(message: str, code: int) -> None:
    sys.stdout.flush()
    # one line (echoed input cannot forge another) and never a password
    sys.stderr.write(f"error: {printable(redact(' '.join(message.split())))}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


if __name__ == "__main__":
    main()
