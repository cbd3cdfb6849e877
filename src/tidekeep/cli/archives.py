"""`tidekeep archives ...`: this module's `app`, the archives noun. Its commands are plain functions of
archives_ingest.py (ingest and the archives held), archives_search.py (search jobs and results) and
archives_gc.py (the garbage collectors)."""

from __future__ import annotations

import typer

from . import archives_gc, archives_ingest, archives_search

app = typer.Typer(help="Log archives: ingest logs with Spark, search them, expire archives and results.",
                  no_args_is_help=True)

# in the order `archives --help` lists them
app.command("ingest")(archives_ingest.ingest)
app.command("list")(archives_ingest.list_archives)
app.command("show")(archives_ingest.show)
app.command("datasets")(archives_ingest.datasets)
app.command("search")(archives_search.search)
app.command("results")(archives_search.results)
app.command("jobs")(archives_search.jobs)
app.command("job")(archives_search.job)
app.command("cancel")(archives_search.cancel)
app.command("gc")(archives_gc.gc)
