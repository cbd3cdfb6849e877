"""`tidekeep catalog ...`: this module's `app`, the catalog noun. Its commands are plain functions of
catalog_records.py (meta records), catalog_job.py (the retention job) and catalog_purge.py; its
groups are catalog_dict.py (`catalog dict`) and catalog_rules.py (`catalog rules`)."""

from __future__ import annotations

import typer

from . import catalog_dict, catalog_job, catalog_purge, catalog_records, catalog_rules

app = typer.Typer(help="The catalog: meta records, retention rules, the retention job and purge.",
                  no_args_is_help=True)

# in the order `catalog --help` lists them
app.command("add")(catalog_records.add)
app.command("import")(catalog_records.import_)
app.command("generate")(catalog_records.generate)
app.command("list")(catalog_records.list_records)
app.command("show")(catalog_records.show)
app.command("run")(catalog_job.run)
app.command("impact")(catalog_job.impact)
app.command("explain")(catalog_job.explain)
app.command("runs")(catalog_job.runs)
app.command("purge")(catalog_purge.purge)
app.add_typer(catalog_dict.app, name="dict")
app.add_typer(catalog_rules.app, name="rules")
