"""Deletion reports (docs/audit-reports.md): every deletion of a time window, per family, with what
was deleted, why, how many bytes, by whom, the holds in force, and the audit chain's hash that signs
it — a value built from audit rows and holds by the pure functions here. The reader
(store/audit_report_reader.py) loads the rows; store/audit_report_render.py renders the document
as CSV or PDF.

A deletion is an audit row whose action deletes retained data, the same actions the dashboard
counts (store/overview_queries.py, FAMILY_ACTIONS): streams `truncate` and `delete_stream`,
archives `archive_expire` and `search_results_expire`, catalog `catalog_delete` (logical: frees no
byte itself) and `catalog_purge`. Everything else in the trail deletes nothing that was retained
(`sweep` removes files no committed metadata refers to, `txn_abort` staged events that never
joined the stream) or deletes nothing at all (holds, rule saves, tokens, ingests, killed searches).

Which deletions a hold blocked is not recorded anywhere: a deletion a hold refuses writes no row
(docs/holds.md) and the collectors' held counts live only in their run results. So a report lists
the holds in force during its window and what each covers, never a number of blocked deletions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput
from ..units import iso_utc
from .overview_queries import FAMILY_ACTIONS
from .segment_ids import segment_name

TITLE = "tidekeep deletion report"
FAMILY_OF: dict[str, str] = {action: family for family, actions in FAMILY_ACTIONS.items() for action in actions}
DELETION_ACTIONS: tuple[str, ...] = tuple(FAMILY_OF)
SCOPED_FAMILY = "streams"  # a report limited to a scope covers that scope's streams only

# why a deletion happened
POLICY = "policy"  # a retention policy or period: a stream's size/time rules, a collector's setting
RULE = "rule"  # the catalog's retention rules
SUBSCRIBER_BOUND = "subscriber-bound"  # a stream truncation the subscribers' lower bound shaped
MANUAL = "manual"  # a person or program asked for it (its actor is in every row)
WHY_KINDS = (POLICY, RULE, SUBSCRIBER_BOUND, MANUAL)

# a retention cycle's truncation reason, as streams/retention_store.py writes it: "retention RULE: ..."
_RETENTION_REASON = re.compile(r"retention ([a-z][a-z-]*): ")
# the settings whose periods expire what their collectors delete (docs/configuration.md)
_SETTING_OF = {"archive_expire": "archive_output.retention_period",
               "search_results_expire": "results_cache.retention_period",
               "catalog_purge": "catalog.purge_age"}
# what a hold of each kind protects (docs/holds.md)
COVERS = {"stream": "the stream {target}: no truncation, no deletion",
          "records": "catalog records matching {target}, and the archives filed as them",
          "dataset": "every archive of dataset {target}, and its catalog record",
          "archive": "archive {target}, and its catalog record"}


LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the last time a report can print


def check_window(since_ms: int, until_ms: int) -> None:
    for what, ms in (("since", since_ms), ("until", until_ms)):
        if not 0 <= ms <= LAST_MS:
            raise InvalidInput(f"invalid {what} {ms}: a report's window lies between 1970-01-01T00:00:00Z and "
                               "9999-12-31T23:59:59.999Z")
    if since_ms > until_ms:
        raise InvalidInput(f"invalid window: since ({iso_utc(since_ms)}) is after until ({iso_utc(until_ms)})")


# ---- one deletion ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Why:
    kind: str  # one of WHY_KINDS
    rule: str | None  # the stream rule code, the catalog rules, or the collector's setting
    reason: str  # as the audit row recorded it


@dataclass(frozen=True)
class Deletion:
    id: int
    time_ms: int
    family: str
    action: str
    target: str
    what: str
    why: Why
    actor: str
    bytes: int  # the row's bytes_freed
    row_hash: str | None  # the row's link in the audit chain
    details: Any


def parsed_details(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:  # written around tidekeep: shown as stored, never fatal to a report
        return text


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def why_of(action: str, reason: str, details: Any) -> Why:
    """Why a deleting row deleted, read from what its family records (the module doc lists them).
    A retention cycle's truncation carries a `retention` detail; rows written before it are read by
    their reason, which since then no manual truncation may begin like a cycle's."""
    if action == "truncate":
        cycle = _dict(details).get("retention")
        # a cycle's row says so in its details; a row from before that mark, by its reason alone
        # (a manual reason may no longer begin like a cycle's: streams/retention_reasons.py)
        match = _RETENTION_REASON.match(reason)
        if isinstance(cycle, dict):
            rule = str(cycle.get("rule")) if cycle.get("rule") is not None else None
        elif match is not None:
            rule = match.group(1)
        else:
            return Why(MANUAL, None, reason)
        kind = SUBSCRIBER_BOUND if isinstance(_dict(details).get("consumption"), dict) else POLICY
        return Why(kind, rule, reason)
    if action == "catalog_delete":
        rules = sorted(_dict(_dict(details).get("rules")), key=lambda n: (len(n), n))
        return Why(RULE, ("rules " + ", ".join(rules)) if rules else None, reason)
    if action in _SETTING_OF:
        return Why(POLICY, _SETTING_OF[action], reason)
    return Why(MANUAL, None, reason)  # delete_stream: only ever asked for


def positions_text(stored: str | None) -> str:
    """A head as the audit table stores it ({"<segment id>": offset}) in the compact cut's form."""
    if stored is None:
        return "-"
    try:
        positions = {int(k): int(v) for k, v in json.loads(stored).items()}
    except (ValueError, TypeError, AttributeError):
        return stored
    return ",".join(f"{segment_name(s)}={o}" for s, o in sorted(positions.items()))


def what_of(action: str, target: str, old_head: str | None, new_head: str | None, details: Any) -> str:
    """What a deleting row deleted, in one line, from its target, heads and details."""
    facts = _dict(details)
    if action == "truncate":
        return (f"{target} data before {positions_text(new_head)} (head was {positions_text(old_head)}; "
                f"{facts.get('chunks', '?')} chunk file(s))")
    if action == "delete_stream":
        return f"stream {target} and all its data" + (" (sealed first)" if facts.get("sealed_first") else "")
    if action == "archive_expire":
        archives = facts.get("archives")
        count = len(archives) if isinstance(archives, list) else "?"
        return f"{count} archive(s) of dataset {target.removeprefix('archives/')}"
    if action == "search_results_expire":
        return f"the results of search {facts.get('job', target.removeprefix('search/'))}"
    if action == "catalog_delete":
        counts = [_dict(c).get("rows") for c in _dict(facts.get("rules")).values()]
        rows = sum(n for n in counts if isinstance(n, int))
        period = facts.get("period")
        shown = f" in period [{iso_utc(period[0])}, {iso_utc(period[1])})" if (
            isinstance(period, list) and len(period) == 2
            and all(isinstance(p, int) and 0 <= p <= LAST_MS for p in period)) else ""
        return f"{rows} catalog record(s) marked DELETED ({facts.get('bytes', 0)} bytes of data){shown}"
    if action == "catalog_purge":
        return (f"{facts.get('count', '?')} DELETED catalog record(s) and {facts.get('files_removed', 0)} "
                "data file(s)")
    return target


def deletion_of(row: Mapping[str, Any]) -> Deletion | None:
    """The deletion an audit row records; None for a row that deletes no retained data."""
    action = row["action"]
    family = FAMILY_OF.get(action)
    if family is None:
        return None
    details = parsed_details(row["details"])
    return Deletion(row["id"], row["time_ms"], family, action, row["target"],
                    what_of(action, row["target"], row["old_head"], row["new_head"], details),
                    why_of(action, row["reason"], details), row["actor"], row["bytes_freed"],
                    row.get("row_hash"), details)


# ---- holds ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HoldEvent:
    """A hold added or removed, from its "hold_add" or "hold_remove" audit row."""

    row_id: int
    added: bool  # hold_add; else hold_remove
    hold_id: int
    kind: str
    target: str
    reason: str
    time_ms: int
    actor: str


def hold_event(row: Mapping[str, Any]) -> HoldEvent | None:
    """The hold a hold_add/hold_remove row names (store/holds.py writes {"hold": id, "kind": kind});
    None for any other row, or one whose details do not say."""
    details = _dict(parsed_details(row["details"])) if row["action"] in ("hold_add", "hold_remove") else {}
    hold_id, kind = details.get("hold"), details.get("kind")
    if not isinstance(hold_id, int) or isinstance(hold_id, bool) or not isinstance(kind, str):
        return None
    return HoldEvent(row["id"], row["action"] == "hold_add", hold_id, kind, row["target"], row["reason"],
                     row["time_ms"], row["actor"])


@dataclass(frozen=True)
class HoldInForce:
    id: int
    kind: str
    target: str
    reason: str
    added_ms: int | None  # None: its hold_add row is not in the trail
    added_by: str | None
    removed_ms: int | None  # None: not removed (as far as the trail read says)
    removed_by: str | None

    @property
    def covers(self) -> str:
        return COVERS.get(self.kind, "{target}").format(target=self.target)


def holds_in_force(events: Iterable[HoldEvent], since_ms: int, until_ms: int) -> tuple[HoldInForce, ...]:
    """The holds in force at some moment of [since, until] — added at or before `until`, not removed
    before `since` — from the trail's hold_add and hold_remove rows alone, oldest first.

    The trail, not the holds table: a removed hold's row is gone from the table, and its id may be
    given again to a later hold (SQLite reuses the highest id once its row is deleted). Read in row
    order, each removal closes the hold of that id its latest addition opened, so every life of a
    reused id stays apart. A removal whose addition is not in the trail has an unknown start."""
    open_holds: dict[int, HoldEvent] = {}
    lives: list[tuple[HoldEvent | None, HoldEvent | None]] = []
    for event in sorted(events, key=lambda e: e.row_id):
        if event.added:
            # an id is given again only after its hold was removed, which the trail records first
            open_holds[event.hold_id] = event
        else:
            lives.append((open_holds.pop(event.hold_id, None), event))
    lives.extend((added, None) for added in open_holds.values())
    found: list[tuple[int, HoldInForce]] = []
    for added, gone in lives:
        first = added or gone
        assert first is not None  # every life has an addition or a removal
        if (added is not None and added.time_ms > until_ms) or (gone is not None and gone.time_ms < since_ms):
            continue
        # the removal reads "released hold N (REASON)"; the addition's row has the reason itself
        found.append((first.row_id, HoldInForce(
            first.hold_id, first.kind, first.target, first.reason,
            None if added is None else added.time_ms, None if added is None else added.actor,
            None if gone is None else gone.time_ms, None if gone is None else gone.actor)))
    return tuple(hold for _, hold in sorted(found, key=lambda pair: pair[0]))


# ---- the report ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Totals:
    deletions: int
    bytes: int


@dataclass(frozen=True)
class Signature:
    """The audit chain's hash that signs the report: the `row_hash` of the newest row (by id) in
    the window, or with none there, of the newest row before its end; None on an empty trail."""

    row_id: int | None
    row_hash: str | None


@dataclass(frozen=True)
class DeletionReport:
    since_ms: int
    until_ms: int
    generated_ms: int
    scope: str | None
    families: tuple[str, ...]
    deletions: tuple[Deletion, ...]  # oldest first (by id)
    holds: tuple[HoldInForce, ...]
    signature: Signature

    def family_totals(self) -> dict[str, Totals]:
        return {family: Totals(sum(1 for d in self.deletions if d.family == family),
                               sum(d.bytes for d in self.deletions if d.family == family))
                for family in self.families}

    def totals(self) -> Totals:
        return Totals(len(self.deletions), sum(d.bytes for d in self.deletions))


def in_scope(target: str, scope: str | None) -> bool:
    return scope is None or target.startswith(f"{scope}/")


def build_report(rows: Iterable[Mapping[str, Any]], *, since_ms: int, until_ms: int, generated_ms: int,
                 scope: str | None = None, hold_rows: Iterable[Mapping[str, Any]] = (),
                 signature: Signature = Signature(None, None)) -> DeletionReport:
    """The report of the deleting `rows` with `since <= time_ms <= until` (others are left out, so
    any superset of the window's rows may be given), of `scope`'s streams only when given.
    `hold_rows`: every hold_add and hold_remove row of the trail (others are left out)."""
    check_window(since_ms, until_ms)
    families = (SCOPED_FAMILY,) if scope is not None else tuple(FAMILY_ACTIONS)
    deletions = [d for d in map(deletion_of, rows) if d is not None and since_ms <= d.time_ms <= until_ms
                 and d.family in families and in_scope(d.target, scope)]
    events = [e for e in map(hold_event, hold_rows) if e is not None
              and (scope is None or (e.kind == "stream" and in_scope(e.target, scope)))]
    holds = holds_in_force(events, since_ms, until_ms)
    return DeletionReport(since_ms, until_ms, generated_ms, scope, families,
                          tuple(sorted(deletions, key=lambda d: d.id)), holds, signature)


# ---- the document (JSON; what the renderers and the API's remote clients read) -------------------------
def totals_document(totals: Totals) -> dict[str, int]:
    return {"deletions": totals.deletions, "bytes": totals.bytes}


def deletion_document(d: Deletion) -> dict[str, Any]:
    return {"id": d.id, "time": iso_utc(d.time_ms), "time_ms": d.time_ms, "family": d.family, "action": d.action,
            "target": d.target, "what": d.what, "why": d.why.kind, "rule": d.why.rule, "reason": d.why.reason,
            "actor": d.actor, "bytes": d.bytes, "row_hash": d.row_hash, "details": d.details}


def hold_document(h: HoldInForce) -> dict[str, Any]:
    return {"id": h.id, "kind": h.kind, "target": h.target, "reason": h.reason, "covers": h.covers,
            "added": iso_utc(h.added_ms), "added_ms": h.added_ms, "added_by": h.added_by,
            "removed": iso_utc(h.removed_ms), "removed_ms": h.removed_ms, "removed_by": h.removed_by}


def report_document(report: DeletionReport) -> dict[str, Any]:
    """The report as `tidekeep audit report --json` prints it and the API answers it."""
    return {
        "title": TITLE,
        "since": iso_utc(report.since_ms), "since_ms": report.since_ms,
        "until": iso_utc(report.until_ms), "until_ms": report.until_ms,
        "generated": iso_utc(report.generated_ms), "generated_ms": report.generated_ms,
        "scope": report.scope,
        "families": {f: totals_document(t) for f, t in report.family_totals().items()},
        "totals": totals_document(report.totals()),
        "deletions": [deletion_document(d) for d in report.deletions],
        "holds": [hold_document(h) for h in report.holds],
        "signature": {"row_id": report.signature.row_id, "row_hash": report.signature.row_hash},
    }


__all__ = ["COVERS", "DELETION_ACTIONS", "FAMILY_OF", "LAST_MS", "MANUAL", "POLICY", "RULE", "SUBSCRIBER_BOUND",
           "TITLE", "WHY_KINDS", "Deletion", "DeletionReport", "HoldEvent", "HoldInForce", "Signature", "Totals",
           "Why", "build_report", "check_window", "deletion_of", "hold_event", "holds_in_force", "in_scope",
           "positions_text", "report_document", "what_of", "why_of"]
