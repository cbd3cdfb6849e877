"""Retention rules and the rule set (Stroom's DataRetentionRule / DataRetentionRules).

Precedence (docs/catalog-rules.md): active rules are tested in ascending rule number; the first rule whose
expression matches a record decides; no match retains; a forever rule (age None) always retains.
A rule is active when it is enabled and its expression is enabled (Stroom's getActiveRules); an
enabled expression whose children are all disabled matches everything.

The rule set carries a version, a new random UUID on every save, which invalidates every tracker.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput, NotFound
from .ages import Age, age_string, cutoff_ms, parse_age
from .expressions.ast import Expr, Operator, Term


@dataclass(frozen=True)
class RetentionRule:
    rule_number: int
    name: str
    enabled: bool
    expression: Expr
    age: Age | None  # None = forever

    @property
    def forever(self) -> bool:
        return self.age is None

    @property
    def active(self) -> bool:
        return self.enabled and self.expression.enabled

    @property
    def age_string(self) -> str:
        return age_string(self.age)

    def cutoff_ms(self, now_ms: int) -> int:
        """Records created before this have expired under this rule (the epoch for forever)."""
        return cutoff_ms(now_ms, self.age)

    def __str__(self) -> str:  # Stroom's "<ruleNumber> <name>", as shown for a matching rule
        return f"{self.rule_number} {self.name}"

# Stroom's ruleNumber is a Java int; a larger number also overflows the job's SQL (a rule set saved
# with one would fail every run), so it is refused with the other checks of a rule
MAX_RULE_NUMBER = 2**31 - 1


@dataclass(frozen=True)
class RuleSet:
    version: str  # "" before the first save
    rules: tuple[RetentionRule, ...] = ()

    def active_rules(self) -> tuple[RetentionRule, ...]:
        return active_rules(self.rules)


def active_rules(rules: Iterable[RetentionRule]) -> tuple[RetentionRule, ...]:
    """The rules that take part in retention, in precedence order (ascending rule number)."""
    return tuple(sorted((r for r in rules if r.active), key=lambda r: r.rule_number))


def check_rule(rule: object, where: str | None = None) -> RetentionRule:
    """One rule's own fields; errors name the rule ("rule 3: ...")."""
    if not isinstance(rule, RetentionRule):
        raise InvalidInput(f"{where or 'rule'}: expected a RetentionRule, got {type(rule).__name__}")
    number = rule.rule_number
    if isinstance(number, bool) or not isinstance(number, int):
        raise InvalidInput(f"{where or 'rule'}: rule number {number!r} is not a whole number")
    place = where or f"rule {number}"
    if number < 1:
        raise InvalidInput(f"{place}: rule number must be 1 or more, got {number}")
    if number > MAX_RULE_NUMBER:
        raise InvalidInput(f"{place}: rule number must be at most {MAX_RULE_NUMBER}, got {number}")
    if not isinstance(rule.name, str) or not rule.name.strip():
        raise InvalidInput(f"{place}: name must not be empty")
    if not isinstance(rule.enabled, bool):
        raise InvalidInput(f"{place}: enabled must be true or false, got {rule.enabled!r}")
    if not isinstance(rule.expression, (Term, Operator)):
        raise InvalidInput(f"{place}: expression must be an expression tree, got {type(rule.expression).__name__}")
    if rule.age is not None and not isinstance(rule.age, Age):
        raise InvalidInput(f"{place}: age must be an Age or None (forever), got {rule.age!r}")
    return rule


def check_rules(rules: Iterable[object]) -> tuple[RetentionRule, ...]:
    """Every rule's fields, then that rule numbers are unique and the rule set's size is within the
    limits of docs/catalog-expressions.md. Order is kept as given."""
    from .expressions.shape import MAX_RULE_SET_TERMS, MAX_RULES, check_size, check_total

    checked = tuple(check_rule(r) for r in rules)
    seen: set[int] = set()
    for rule in checked:
        if rule.rule_number in seen:
            raise InvalidInput(f"rule {rule.rule_number}: duplicate rule number {rule.rule_number}")
        seen.add(rule.rule_number)
    # the job evaluates every rule in one Spark expression: bound its size here, not at run time
    if len(checked) > MAX_RULES:
        raise InvalidInput(f"the rule set has {len(checked)} rules, at most {MAX_RULES} are allowed")
    sizes = []
    for rule in checked:
        try:
            sizes.append(check_size(rule.expression))
        except InvalidInput as exc:
            raise InvalidInput(f"rule {rule.rule_number}: {exc}") from None
    check_total(sizes, MAX_RULE_SET_TERMS, "the rules' expressions")
    return checked




# ---- files: tidekeep's YAML and Stroom's DataRetentionRules JSON ---------------------------------

STROOM_DOCUMENT_KEYS = frozenset({"type", "uuid", "name", "version", "createTimeMs", "updateTimeMs", "createUser",
                                  "updateUser", "rules"})
STROOM_RULE_KEYS = frozenset({"ruleNumber", "creationTime", "name", "enabled", "expression", "age", "timeUnit",
                              "forever"})
YAML_DOCUMENT_KEYS = frozenset({"rules"})
YAML_RULE_KEYS = frozenset({"number", "name", "expression", "age", "enabled"})
STROOM_DOCUMENT_NAME = "Data Retention"  # Stroom's single cluster-wide rules document
STROOM_FOREVER_AGE = (50, "YEARS")  # what Stroom's foreverRule() stores; ignored when forever is true


def _unknown_keys(obj: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(str(k) for k in obj if k not in allowed)
    if unknown:
        raise InvalidInput(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                           f"(allowed: {', '.join(sorted(allowed))})")


def _expression(value: Any, where: str) -> Expr:
    from .expressions import from_json, parse, validate

    if isinstance(value, str):
        try:
            expr = parse(value)
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}") from None
    elif isinstance(value, Mapping):
        expr = from_json(dict(value), where=f"{where}: expression")
    else:
        raise InvalidInput(f"{where}: expression: expected text or a Stroom expression tree, got {_kind(value)}")
    try:
        validate(expr)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None
    return expr


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def _rule_number(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{where}: rule number {value!r} is not a whole number")
    if value < 1:
        raise InvalidInput(f"{where}: rule number must be 1 or more, got {value}")
    if value > MAX_RULE_NUMBER:
        raise InvalidInput(f"{where}: rule number must be at most {MAX_RULE_NUMBER}, got {value}")
    return value


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{where}: name must be non-empty text, got {value!r}")
    return value.strip()


def _enabled(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{where}: enabled must be true or false, got {value!r}")
    return value


def _rule_header(obj: Any, index: int, expected: str, number_key: str, known: Any, required: tuple[str, ...],
                 null_is_missing: bool) -> tuple[int, str]:
    """The checks every rule form shares: a mapping, a valid rule number, no unknown keys, the
    required keys present (Stroom's JSON writes absent values as null). Returns the number and the
    place to name in errors ("rule N")."""
    where = f"rules[{index}]"
    if not isinstance(obj, Mapping):
        raise InvalidInput(f"{where}: expected {expected}, got {_kind(obj)}")
    if number_key not in obj:
        raise InvalidInput(f"{where}: {number_key}: missing")
    number = _rule_number(obj[number_key], where)
    where = f"rule {number}"
    _unknown_keys(obj, known, where)
    for key in required:
        if key not in obj or (null_is_missing and obj[key] is None):
            raise InvalidInput(f"{where}: {key}: missing")
    return number, where


def _yaml_rule(obj: Any, index: int) -> RetentionRule:
    number, where = _rule_header(obj, index, "a mapping with number, name, expression and age", "number",
                                 YAML_RULE_KEYS, ("name", "expression", "age"), null_is_missing=False)
    age_value = obj["age"]
    if isinstance(age_value, bool) or age_value is None:
        raise InvalidInput(f"{where}: age: expected text like '30 days' or 'forever', got {age_value!r}")
    return RetentionRule(number, _name(obj["name"], where), _enabled(obj.get("enabled", True), where),
                         _expression(obj["expression"], where), parse_age(age_value, f"{where}: age"))


def _stroom_rule(obj: Any, index: int) -> RetentionRule:
    number, where = _rule_header(obj, index, "a DataRetentionRule object", "ruleNumber", STROOM_RULE_KEYS,
                                 ("name", "expression"), null_is_missing=True)
    forever = obj.get("forever", False)
    if not isinstance(forever, bool):
        raise InvalidInput(f"{where}: forever must be true or false, got {forever!r}")
    age: Age | None = None
    if not forever:  # Stroom ignores age and timeUnit of a forever rule
        if obj.get("age") is None or obj.get("timeUnit") is None:
            raise InvalidInput(f"{where}: age and timeUnit are required unless forever is true")
        age = parse_age((obj["age"], obj["timeUnit"]), f"{where}: age")
    return RetentionRule(number, _name(obj["name"], where), _enabled(obj.get("enabled", True), where),
                         _expression(obj["expression"], where), age)


def is_stroom_document(document: Any) -> bool:
    """Stroom's DataRetentionRules: typed so, or rules written with `ruleNumber`."""
    if not isinstance(document, Mapping):
        return False
    if document.get("type") == "DataRetentionRules":
        return True
    rules = document.get("rules")
    return isinstance(rules, list) and any(isinstance(r, Mapping) and "ruleNumber" in r for r in rules)


def rules_from_document(document: Any) -> RuleSet:
    """A rule set (version "") from a parsed YAML or Stroom JSON document; InvalidInput names the
    rule and the field."""
    stroom = is_stroom_document(document)
    if not isinstance(document, Mapping):
        raise InvalidInput(f"expected a mapping with a 'rules' list, got {_kind(document)}")
    _unknown_keys(document, STROOM_DOCUMENT_KEYS if stroom else YAML_DOCUMENT_KEYS, "rule file")
    if stroom and document.get("type", "DataRetentionRules") != "DataRetentionRules":
        raise InvalidInput(f"rule file: type: expected 'DataRetentionRules', got {document['type']!r}")
    rules = document.get("rules")
    if rules is None:
        rules = [] if stroom else None
    if not isinstance(rules, list):
        raise InvalidInput(f"rule file: rules: expected a list, got {_kind(rules)}")
    read = _stroom_rule if stroom else _yaml_rule
    return RuleSet("", check_rules(read(obj, i) for i, obj in enumerate(rules)))


def parse_rules_text(text: str, source: str = "rules") -> RuleSet:
    """Rules from the text of a YAML or Stroom JSON file (JSON when it starts with '{').
    Errors are InvalidInput prefixed with `source`; syntax errors give the line and column."""
    try:
        document = _load_json(text) if text.lstrip().startswith("{") else _load_yaml(text)
        return rules_from_document(document)
    except InvalidInput as exc:
        raise InvalidInput(f"{source}: {exc}") from None
    except RecursionError:  # an expression nested thousands deep: refuse it rather than crash
        raise InvalidInput(f"{source}: an expression is nested too deeply") from None


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InvalidInput("invalid JSON: nested too deeply") from None


def _load_yaml(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        place = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InvalidInput(f"invalid YAML{place}: {exc.problem or exc.context}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise InvalidInput(f"invalid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


def load_rules_file(path: str | Path) -> RuleSet:
    """Rules from a YAML file or a Stroom DataRetentionRules JSON file (detected from the content)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NotFound(f"rule file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise InvalidInput(f"rule file {str(path)!r}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_rules_text(text, str(path))


# ---- writing -------------------------------------------------------------------------------------

def rule_to_stroom(rule: RetentionRule, creation_time_ms: int = 0) -> dict[str, Any]:
    from .expressions import to_json

    amount, unit = STROOM_FOREVER_AGE if rule.age is None else (rule.age.amount, rule.age.unit.value)
    return {"ruleNumber": rule.rule_number, "creationTime": creation_time_ms, "name": rule.name,
            "enabled": rule.enabled, "expression": to_json(rule.expression), "age": amount, "timeUnit": unit,
            "forever": rule.age is None}


def to_stroom_json(ruleset: RuleSet, creation_time_ms: int = 0) -> dict[str, Any]:
    """Stroom's DataRetentionRules document for the rule set (rules in rule-number order)."""
    return {"type": "DataRetentionRules", "uuid": ruleset.version or None, "name": STROOM_DOCUMENT_NAME,
            "version": ruleset.version or None,
            "rules": [rule_to_stroom(r, creation_time_ms) for r in sorted(ruleset.rules, key=lambda r: r.rule_number)]}


def _expression_for_yaml(expr: Expr) -> str | dict[str, Any]:
    # the text form when it says everything; disabled items only survive in the tree form
    from .expressions import parse, to_json, to_text

    text = to_text(expr)
    return text if parse(text) == expr else to_json(expr)


def to_yaml_document(ruleset: RuleSet) -> dict[str, Any]:
    """tidekeep's YAML rule file as a document (load it back with rules_from_document)."""
    return {"rules": [{"number": r.rule_number, "name": r.name, "expression": _expression_for_yaml(r.expression),
                       "age": age_string(r.age).lower(), "enabled": r.enabled}
                      for r in sorted(ruleset.rules, key=lambda r: r.rule_number)]}


def to_yaml_text(ruleset: RuleSet) -> str:
    """The YAML rule file. A string holding a control or bidi character is written double-quoted,
    where the escaped form the CLI prints (docs/cli.md) reads back as the same character."""
    import yaml

    from ..printable import printable

    class Dumper(yaml.SafeDumper):
        pass

    def represent_text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if printable(value) != value else None)

    Dumper.add_representer(str, represent_text)
    return yaml.dump(to_yaml_document(ruleset), Dumper=Dumper, sort_keys=False, allow_unicode=True, width=120)


__all__ = [
    "RetentionRule",
    "RuleSet",
    "active_rules",
    "check_rule",
    "check_rules",
    "is_stroom_document",
    "load_rules_file",
    "parse_rules_text",
    "rule_to_stroom",
    "rules_from_document",
    "to_stroom_json",
    "to_yaml_document",
    "to_yaml_text",
]
