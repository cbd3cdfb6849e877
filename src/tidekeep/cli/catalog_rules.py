"""`tidekeep catalog rules show|set|validate|export`: the retention rule set.

Rules come from a YAML file or a Stroom DataRetentionRules JSON file (detected from the content).
`set` saves them under a new version (which restarts every tracker: the next run scans all data);
`validate` checks a file exactly as `set` would and changes nothing; `export` writes the saved
rules as YAML, or as Stroom JSON with --stroom. This module's `app` is a group of the catalog app.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .context import open_client, output
from .options import JsonFlag
from .output import emit, emit_document, emit_json, emit_table, iso_utc

if TYPE_CHECKING:
    from ..catalog.rules import RuleSet
RuleFile = Annotated[Path, typer.Argument(metavar="FILE", help="A YAML rule file or Stroom DataRetentionRules JSON")]


def ruleset_document(ruleset: RuleSet, updated_ms: int | None = None, updated_by: str | None = None) -> dict[str, Any]:
    from ..catalog.rule_documents import ruleset_document as document  # the catalog loads on use only

    return document(ruleset, updated_ms, updated_by)


def emit_rules(ruleset: RuleSet) -> None:
    from ..catalog.expressions import to_text

    if not ruleset.rules:
        emit("no rules: every record is retained")
        return
    emit_table(["RULE", "NAME", "ENABLED", "AGE", "EXPRESSION"],
               [[r.rule_number, r.name, "yes" if r.active else "no", r.age_string, to_text(r.expression)]
                for r in sorted(ruleset.rules, key=lambda r: r.rule_number)])


app = typer.Typer(help="Retention rules: show, set, validate and export the rule set.", no_args_is_help=True)


def emit_saved(saved: Any) -> None:
    if not saved.ruleset.version:
        emit("no rules saved: every record is retained")
        return
    emit(f"version {saved.ruleset.version}, saved {iso_utc(saved.updated_ms)} by {saved.updated_by}")
    emit_rules(saved.ruleset)


def emit_validated(path: Path, ruleset: RuleSet) -> None:
    emit(f"{path}: {len(ruleset.rules)} rule(s), valid")
    emit_rules(ruleset)


@app.command("show")
def show(ctx: typer.Context, json_output: JsonFlag = False) -> None:
    """The saved rules in precedence order (lowest rule number first; first match decides)."""
    from ..catalog.rules_store import RulesStore

    with open_client(ctx) as client:
        saved = RulesStore(client.workspace).saved()
    output(ctx, json_output).show(ruleset_document(saved.ruleset, saved.updated_ms, saved.updated_by),
                                  lambda: emit_saved(saved))


@app.command("set")
def set_rules(ctx: typer.Context, path: RuleFile, json_output: JsonFlag = False) -> None:
    """Replace the rule set from FILE (audited). A new version restarts every tracker."""
    from ..catalog.rules_store import RulesStore

    with open_client(ctx) as client:
        ruleset = RulesStore(client.workspace).save(path)
        saved = RulesStore(client.workspace).saved()
    output(ctx, json_output).show(ruleset_document(ruleset, saved.updated_ms, saved.updated_by),
                                  f"rules saved: version {ruleset.version}, {len(ruleset.rules)} rule(s)")


@app.command("validate")
def validate(ctx: typer.Context, path: RuleFile, json_output: JsonFlag = False) -> None:
    """Check FILE as `set` would (rules, expressions, dictionaries) without saving anything."""
    from ..catalog.rules_store import RulesStore

    with open_client(ctx) as client:
        ruleset = RulesStore(client.workspace).validate(path)
    output(ctx, json_output).show({"valid": True, **ruleset_document(ruleset)},
                                  lambda: emit_validated(path, ruleset))


@app.command("export")
def export(
    ctx: typer.Context,
    stroom: Annotated[bool, typer.Option("--stroom", help="Stroom DataRetentionRules JSON, not YAML")] = False,
) -> None:
    """Print the saved rules as a rule file (YAML, or Stroom JSON with --stroom)."""
    from ..catalog.rules import to_stroom_json, to_yaml_text
    from ..catalog.rules_store import RulesStore

    with open_client(ctx) as client:
        saved = RulesStore(client.workspace).saved()
    if stroom:
        emit_json(to_stroom_json(saved.ruleset, saved.updated_ms or 0))
    else:
        emit_document(to_yaml_text(saved.ruleset).rstrip("\n"))
