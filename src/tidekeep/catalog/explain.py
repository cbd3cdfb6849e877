"""`explain`: why a catalog record is kept or deleted — the deciding rule (first active rule in
ascending rule number whose expression matches, evaluated with the Python compiler, which agrees
with the job's Spark and SQL compilers), its age, the retain-until time, and the holds on it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store.house import Workspace


@dataclass(frozen=True)
class Explanation:
    record_id: int
    status: str
    status_time: int
    create_time: int
    now_ms: int
    rules_version: str
    rule: int | None  # the deciding rule's number; None when no rule matches (kept forever)
    rule_name: str | None
    age: str  # "Forever" when no rule matches or the rule is forever
    retain_until_ms: int | None  # None: kept forever
    expired: bool  # the deciding rule's age has passed
    holds: tuple[dict[str, Any], ...]  # holds whose expression matches the record
    decision: str  # KEEP | DELETE (the next run deletes it) | HELD | DELETED | LOCKED
    reason: str  # one line

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def explain_record(workspace: Workspace, record_id: int, now_ms: int | None = None) -> Explanation:
    from ..units import iso_utc
    from .ages import cutoff_ms, retain_until_ms
    from .expressions import CompileContext, to_python
    from .holds import holds_matching, load_dictionaries, record_holds
    from .record_store import RecordStore
    from .rules import active_rules
    from .rules_store import RulesStore

    record = RecordStore(workspace).get(record_id)
    now = workspace.clock.now_ms() if now_ms is None else now_ms
    ruleset = RulesStore(workspace).load()
    with workspace.db.read() as conn:
        holds = record_holds(conn)
        ctx = CompileContext(now, load_dictionaries(conn))
    row = record.to_row() | {"id": record.id}
    deciding = next((r for r in active_rules(ruleset.rules) if to_python(r.expression, ctx)(row)), None)
    age = deciding.age if deciding is not None else None
    until = retain_until_ms(record.create_time, age)
    expired = age is not None and record.create_time < cutoff_ms(now, age)
    held = tuple({"id": h.id, "reason": h.reason, "expression": h.target} for h in holds_matching(row, holds, ctx))
    rule_text = "no rule matches" if deciding is None else f"rule {deciding.rule_number} '{deciding.name}'"
    if record.status == "DELETED":
        decision, reason = "DELETED", f"logically deleted at {iso_utc(record.status_time)}; the purge removes it"
    elif record.status == "LOCKED":
        decision, reason = "LOCKED", "locked (still being written): the job never deletes locked records"
    elif held:
        decision = "HELD"
        reason = f"{rule_text}; held by hold {held[0]['id']} ({held[0]['reason']}): never deleted while held"
    elif deciding is None:
        decision, reason = "KEEP", "no rule matches: kept forever"
    elif age is None:
        decision, reason = "KEEP", f"{rule_text} keeps it forever"
    elif expired:
        decision, reason = "DELETE", f"{rule_text} kept it for {deciding.age_string}, until {iso_utc(until)}: " \
                                     "the next run deletes it"
    else:
        decision, reason = "KEEP", f"{rule_text} keeps it for {deciding.age_string}, until {iso_utc(until)}"
    assert record.id is not None and record.status_time is not None  # a stored record has both
    return Explanation(record.id, record.status, record.status_time, record.create_time, now, ruleset.version,
                       None if deciding is None else deciding.rule_number,
                       None if deciding is None else deciding.name,
                       "Forever" if deciding is None else deciding.age_string, until, expired, held, decision, reason)
