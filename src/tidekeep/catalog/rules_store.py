"""The saved rule set and the retention trackers, in the metadata store.

The rule set is one row of `catalog_rules` (name "default"): its rules as a JSON list in Stroom's
DataRetentionRule form (expressions as Stroom JSON trees), and a version, a new random UUID on
every save. Saving validates everything first (rules, expressions, and that every dictionary an
IN_DICTIONARY term names exists), then writes the row and an audit entry (action "catalog_rules")
in one transaction, so bad input changes nothing.

Trackers (`catalog_trackers`) remember, per rules version and rule age, the `now` of the run that
last completed that period (docs/design/catalog.md#trackers). Reading them for a version drops those
of every other version: a rules edit invalidates them all.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import InvalidInput, StaleVersion
from ..store.audit import AuditEntry
from ..store.fencing import LeaseFence, check_fence
from ..store.schema_catalog import catalog_dictionaries, catalog_rules, catalog_trackers
from .expressions.ast import Condition, Expr, Operator, Term
from .rules import RetentionRule, RuleSet, check_rules, load_rules_file, rule_to_stroom, rules_from_document

if TYPE_CHECKING:
    from ..store.house import Workspace

RULE_SET_NAME = "default"
AUDIT_ACTION = "catalog_rules"
AUDIT_TARGET = "catalog"  # the catalog job's audit target too


@dataclass(frozen=True)
class SavedRules:
    """The saved rule set with when and by whom it was saved (None before the first save)."""

    ruleset: RuleSet
    updated_ms: int | None
    updated_by: str | None


def _terms(expr: Expr) -> Iterator[Term]:
    if isinstance(expr, Term):
        yield expr
    elif isinstance(expr, Operator):
        for child in expr.children:
            yield from _terms(child)


def named_dictionaries(rule: RetentionRule) -> set[str]:
    """Every dictionary an IN_DICTIONARY term of the rule names, disabled terms included: they are
    saved and can be re-enabled, and a saved rule set never names a missing dictionary."""
    return {t.value for t in _terms(rule.expression) if t.condition is Condition.IN_DICTIONARY and t.value}


def validate_rules(rules: Iterable[object]) -> tuple[RetentionRule, ...]:
    """Rules and expressions (pure checks); errors name the rule. Expressions come back in
    canonical form (field names and values as `load` will read them), so the rule set `save`
    returns equals the one `load` returns."""
    from .expressions import from_json, to_json, validate

    checked = check_rules(rules)
    canonical = []
    for rule in checked:
        try:
            validate(rule.expression)
            expression = from_json(to_json(rule.expression))
        except InvalidInput as exc:
            raise InvalidInput(f"rule {rule.rule_number}: {exc}") from None
        canonical.append(dataclasses.replace(rule, expression=expression))
    return tuple(canonical)


def _as_rules(source: Any) -> tuple[RetentionRule, ...]:
    if isinstance(source, (str, Path)):
        return load_rules_file(source).rules
    if isinstance(source, RuleSet):
        return source.rules
    if isinstance(source, RetentionRule):
        raise InvalidInput("expected a RuleSet, a list of RetentionRule or a rule file path, got one RetentionRule")
    if isinstance(source, Iterable):
        return tuple(source)
    raise InvalidInput(f"expected a RuleSet, a list of RetentionRule or a rule file path, got {type(source).__name__}")


def _document(rules: tuple[RetentionRule, ...], saved_ms: int) -> str:
    return json.dumps([rule_to_stroom(r, saved_ms) for r in sorted(rules, key=lambda r: r.rule_number)],
                      ensure_ascii=False, separators=(",", ":"))


def _read_rules(document: str) -> tuple[RetentionRule, ...]:
    return rules_from_document({"type": "DataRetentionRules", "rules": json.loads(document)}).rules


class RulesStore:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.db = workspace.db

    # ---- the rule set ----------------------------------------------------------------------------
    def load(self) -> RuleSet:
        """The saved rule set; RuleSet(version="", rules=()) before the first save."""
        return self.saved().ruleset

    def saved(self) -> SavedRules:
        with self.db.read() as conn:
            row = conn.execute(sa.select(catalog_rules).where(catalog_rules.c.name == RULE_SET_NAME)).one_or_none()
        if row is None:
            return SavedRules(RuleSet(""), None, None)
        return SavedRules(RuleSet(row.version, _read_rules(row.document)), row.updated_ms, row.updated_by)

    def validate(self, rules: Any) -> RuleSet:
        """Everything `save` checks, without saving: returns the rules as a RuleSet with version ""."""
        checked = validate_rules(_as_rules(rules))
        with self.db.read() as conn:
            self._check_dictionaries(conn, checked)
        return RuleSet("", checked)

    def save(self, rules: Any, expected_version: str | None = None) -> RuleSet:
        """Replace the rule set (a RuleSet, a list of RetentionRule, or a YAML / Stroom JSON file
        path); returns it with its new version. Audited; invalid input changes nothing.

        `expected_version`: the version the edit was based on ("" for none saved yet); when the
        saved version is another, StaleVersion and nothing is saved. The check is the write itself
        (an UPDATE of that version, or an INSERT that does nothing when a row exists), so of two
        saves based on one version exactly one wins, on PostgreSQL as on SQLite."""
        checked = validate_rules(_as_rules(rules))
        version = str(uuid.uuid4())
        now = self.workspace.clock.now_ms()
        actor = self.workspace.audit.actor
        document = _document(checked, now)
        with self.db.write() as conn:
            self._check_dictionaries(conn, checked)  # inside the write: a dictionary deleted meanwhile is seen
            values = {"version": version, "document": document, "updated_ms": now, "updated_by": actor}
            if expected_version is None:
                previous = self._saved_version(conn)
                if previous is None:
                    conn.execute(sa.insert(catalog_rules).values(name=RULE_SET_NAME, **values))
                else:
                    conn.execute(sa.update(catalog_rules).where(catalog_rules.c.name == RULE_SET_NAME)
                                 .values(**values))
            else:
                previous = self._replace(conn, expected_version, values)
            self.workspace.audit.append(conn, AuditEntry(
                AUDIT_ACTION, AUDIT_TARGET, f"retention rules saved: version {version}, {len(checked)} rule(s)",
                details={"version": version, "previous_version": previous,
                         "rules": [{"number": r.rule_number, "name": r.name, "enabled": r.enabled,
                                    "age": r.age_string} for r in sorted(checked, key=lambda r: r.rule_number)]}))
        return RuleSet(version, checked)

    @staticmethod
    def _saved_version(conn: Connection) -> str | None:
        return conn.execute(sa.select(catalog_rules.c.version)
                            .where(catalog_rules.c.name == RULE_SET_NAME)).scalar_one_or_none()

    def _replace(self, conn: Connection, expected_version: str, values: dict[str, Any]) -> str | None:
        """Write `values` only over `expected_version` (""; no row yet); returns the previous version."""
        if expected_version == "":
            # RETURNING, not rowcount: drivers need not count the rows of an INSERT ... ON CONFLICT
            written = conn.execute(insert_statement(conn, catalog_rules).values(name=RULE_SET_NAME, **values)
                                   .on_conflict_do_nothing(index_elements=[catalog_rules.c.name])
                                   .returning(catalog_rules.c.name)).first()
        else:
            written = conn.execute(sa.update(catalog_rules).where(
                catalog_rules.c.name == RULE_SET_NAME, catalog_rules.c.version == expected_version)
                .values(**values).returning(catalog_rules.c.name)).first()
        if written is None:
            current = self._saved_version(conn) or ""
            raise StaleVersion(f"the retention rules are at version {current or '(none saved)'}, not "
                               f"{expected_version or '(none saved)'}: they changed since they were read; "
                               "nothing was saved (read them again)", current)
        return expected_version or None

    def _check_dictionaries(self, conn: Connection, rules: tuple[RetentionRule, ...]) -> None:
        needed = {(rule.rule_number, name) for rule in rules for name in named_dictionaries(rule)}
        if not needed:
            return
        existing = set(conn.execute(sa.select(catalog_dictionaries.c.name).where(
            catalog_dictionaries.c.name.in_(sorted({name for _, name in needed})))).scalars())
        for number, name in sorted(needed):
            if name not in existing:
                raise InvalidInput(f"rule {number}: dictionary {name!r} does not exist "
                                   "(create it with `tidekeep catalog dict set`)")

    # ---- trackers ----------------------------------------------------------------------------------
    def trackers(self, rules_version: str, drop_stale: bool = True,
                 fence: LeaseFence | None = None) -> dict[str, int]:
        """The trackers of `rules_version` by rule age; those of every other version are deleted
        (unless `drop_stale` is false: a dry run reads them and changes nothing) — with a `fence`, only
        while that lease is held (store/fencing.py)."""
        with self.db.write() if drop_stale else self.db.read() as conn:
            if drop_stale:
                check_fence(conn, fence)
                conn.execute(sa.delete(catalog_trackers).where(catalog_trackers.c.rules_version != rules_version))
            rows = conn.execute(sa.select(catalog_trackers.c.rule_age, catalog_trackers.c.last_run_ms)
                                .where(catalog_trackers.c.rules_version == rules_version))
            return {r.rule_age: r.last_run_ms for r in rows}

    def save_tracker(self, rules_version: str, rule_age: str, last_run_ms: int) -> None:
        """Create or move the tracker of (rules_version, rule_age) to `last_run_ms`."""
        with self.db.write() as conn:
            upsert_tracker(conn, rules_version, rule_age, last_run_ms)


def insert_statement(conn: Connection, table: sa.Table) -> Any:
    """An INSERT with the ON CONFLICT clauses of the connection's dialect (SQLite or PostgreSQL)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]  # same ON CONFLICT API
    else:  # pragma: no cover - the metadata store is SQLite or PostgreSQL
        raise InvalidInput(f"unsupported metadata database {conn.dialect.name!r}")
    return insert(table)


def upsert_tracker(conn: Connection, rules_version: str, rule_age: str, last_run_ms: int) -> None:
    """INSERT ... ON CONFLICT DO UPDATE on SQLite and PostgreSQL: atomic even when two runs race."""
    statement = insert_statement(conn, catalog_trackers).values(rules_version=rules_version, rule_age=rule_age,
                                                last_run_ms=last_run_ms)
    conn.execute(statement.on_conflict_do_update(
        index_elements=[catalog_trackers.c.rules_version, catalog_trackers.c.rule_age],
        set_={"last_run_ms": statement.excluded.last_run_ms}))


__all__ = ["AUDIT_ACTION", "RULE_SET_NAME", "RulesStore", "SavedRules", "insert_statement", "named_dictionaries",
           "upsert_tracker", "validate_rules"]
