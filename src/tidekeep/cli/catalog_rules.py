"""`tidekeep catalog rules show|set|validate|export`: the retention rule set.

Rules come from a YAML file or a Stroom DataRetentionRules JSON file (detected from the content).
`set` saves them under a new version (which restarts every tracker: the next run scans all data);
`validate` checks a file exactly as `set` would and changes nothing; `export` writes the saved
rules as YAML, or as Stroom JSON with --stroom.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..catalog.rules import RetentionRule, RuleSet, to_stroom_json, to_yaml_text
from .context import open_client
from .output import emit, emit_document, emit_json, emit_table, iso_utc

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of text")]
RuleFile = Annotated[Path, typer.Argument(metavar="FILE", help="A YAML rule file or Stroom DataRetentionRules JSON")]


def rule_document(rule: RetentionRule) -> dict[str, Any]:
    from ..catalog.expressions import to_json, to_text

    return {"number": rule.rule_number, "name": rule.name, "enabled": rule.enabled, "active": rule.active,
            "age": rule.age_string, "forever": rule.forever, "expression": to_text(rule.expression),
            "expression_tree": to_json(rule.expression)}


def ruleset_document(ruleset: RuleSet, updated_ms: int | None = None, updated_by: str | None = None) -> dict[str, Any]:
    return {"version": ruleset.version or None, "updated_ms": updated_ms, "updated": iso_utc(updated_ms),
            "updated_by": updated_by,
            "rules": [rule_document(r) for r in sorted(ruleset.rules, key=lambda r: r.rule_number)]}


def emit_rules(ruleset: RuleSet) -> None:
    from ..catalog.expressions import to_text

    if not ruleset.rules:
        emit("no rules: every record is retained")
        return
    emit_table(["RULE", "NAME", "ENABLED", "AGE", "EXPRESSION"],
               [[r.rule_number, r.name, "yes" if r.active else "no", r.age_string, to_text(r.expression)]
                for r in sorted(ruleset.rules, key=lambda r: r.rule_number)])


def register(app: typer.Typer) -> None:
    rules_app = typer.Typer(help="Retention rules: show, set, validate and export the rule set.",
                            no_args_is_help=True)
    app.add_typer(rules_app, name="rules")

    @rules_app.command("show")
    def show(ctx: typer.Context, json_output: JsonFlag = False) -> None:
        """The saved rules in precedence order (lowest rule number first; first match decides)."""
        from ..catalog.rules_store import RulesStore

        with open_client(ctx) as client:
            saved = RulesStore(client.workspace).saved()
        if json_output:
            emit_json(ruleset_document(saved.ruleset, saved.updated_ms, saved.updated_by))
            return
        if not saved.ruleset.version:
            emit("no rules saved: every record is retained")
            return
        emit(f"version {saved.ruleset.version}, saved {iso_utc(saved.updated_ms)} by {saved.updated_by}")
        emit_rules(saved.ruleset)

    @rules_app.command("set")
    def set_rules(ctx: typer.Context, path: RuleFile, json_output: JsonFlag = False) -> None:
        """Replace the rule set from FILE (audited). A new version restarts every tracker."""
        from ..catalog.rules_store import RulesStore

        with open_client(ctx) as client:
            ruleset = RulesStore(client.workspace).save(path)
            saved = RulesStore(client.workspace).saved()
        if json_output:
            emit_json(ruleset_document(ruleset, saved.updated_ms, saved.updated_by))
        else:
            emit(f"rules saved: version {ruleset.version}, {len(ruleset.rules)} rule(s)")

    @rules_app.command("validate")
    def validate(ctx: typer.Context, path: RuleFile, json_output: JsonFlag = False) -> None:
        """Check FILE as `set` would (rules, expressions, dictionaries) without saving anything."""
        from ..catalog.rules_store import RulesStore

        with open_client(ctx) as client:
            ruleset = RulesStore(client.workspace).validate(path)
        if json_output:
            emit_json({"valid": True, **ruleset_document(ruleset)})
            return
        emit(f"{path}: {len(ruleset.rules)} rule(s), valid")
        emit_rules(ruleset)

    @rules_app.command("export")
    def export(
        ctx: typer.Context,
        stroom: Annotated[bool, typer.Option("--stroom", help="Stroom DataRetentionRules JSON, not YAML")] = False,
    ) -> None:
        """Print the saved rules as a rule file (YAML, or Stroom JSON with --stroom)."""
        from ..catalog.rules_store import RulesStore

        with open_client(ctx) as client:
            saved = RulesStore(client.workspace).saved()
        if stroom:
            emit_json(to_stroom_json(saved.ruleset, saved.updated_ms or 0))
        else:
            emit_document(to_yaml_text(saved.ruleset).rstrip("\n"))
