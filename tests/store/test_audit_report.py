"""Deletion reports (store/audit_report.py, audit_report_reader.py, docs/audit-reports.md).

- The pure report against a brute-force oracle over generated audit rows, windows and scopes; the
  holds in force against the interval-overlap definition.
- On SQLite and PostgreSQL: a report's totals equal the audit rows in its window (a trail seeded
  with every action, times out of id order, windows drawn by hypothesis), its signature is the
  row_hash of the window's newest row, a window larger than a page is read whole.
- What real operations are reported as: a retention cycle (policy), a subscriber-bound cycle, a
  manual truncation and a stream deletion (manual, with their actor), an archive expiry and a
  catalog purge (policy, their setting); the holds in force as real holds come and go.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tidekeep as tk
from helpers.archives import make_archive
from tidekeep.archives.gc import collect_archives
from tidekeep.errors import InvalidInput
from tidekeep.store.audit import AuditEntry, audit_rows
from tidekeep.store.audit_report import (
    LAST_MS,
    HoldEvent,
    Why,
    build_report,
    check_window,
    holds_in_force,
    report_document,
    why_of,
)
from tidekeep.store.audit_report_reader import PAGE_ROWS, read_deletion_report
from tidekeep.store.schema_catalog import catalog_records

# the oracle's own table of which actions delete what (docs/audit-reports.md), spelled out apart
# from the code's
FAMILY = {"truncate": "streams", "delete_stream": "streams", "archive_expire": "archives",
          "search_results_expire": "archives", "catalog_delete": "catalog", "catalog_purge": "catalog"}
NOT_DELETIONS = ("hold_add", "hold_remove", "sweep", "txn_abort", "catalog_rules", "archive_ingest", "search_kill",
                 "token_create")
ACTIONS = (*FAMILY, *NOT_DELETIONS)
# "ab/x" and "a%/y" must not count for scope "a"; the other families' targets for no scope
TARGETS = ("a/s1", "a/s2", "b/s1", "ab/x", "a%/y", "archives/web", "search/3", "catalog", "streams")
SCOPES = (None, "a", "b", "a%")
MIN = 60_000
T0 = 1_700_000_000_000


def oracle(rows: list[dict[str, Any]], since: int, until: int, scope: str | None) -> dict[str, tuple[int, int]]:
    """Per family (all three, or streams for a scope): (deletions, bytes) of the rows in the window."""
    families = ("streams",) if scope is not None else ("streams", "archives", "catalog")
    found = {family: (0, 0) for family in families}
    for row in rows:
        family = FAMILY.get(row["action"])
        if family not in found or not since <= row["time_ms"] <= until:
            continue
        if scope is not None and not row["target"].startswith(scope + "/"):
            continue
        count, size = found[family]
        found[family] = (count + 1, size + row["bytes_freed"])
    return found


def totals_of(document: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {family: (t["deletions"], t["bytes"]) for family, t in document["families"].items()}


@st.composite
def audit_trails(draw: st.DrawFn) -> list[dict[str, Any]]:
    entries = draw(st.lists(st.tuples(st.integers(0, 60), st.sampled_from(ACTIONS), st.sampled_from(TARGETS),
                                      st.integers(0, 10**12)), max_size=40))
    return [{"id": i + 1, "time_ms": T0 + minute * MIN, "action": action, "target": target, "old_head": None,
             "new_head": None, "bytes_freed": size, "reason": "r", "actor": "x", "details": None, "row_hash": None}
            for i, (minute, action, target, size) in enumerate(entries)]


windows = st.tuples(st.integers(-1, 61), st.integers(-1, 61)).map(sorted).map(
    lambda w: (T0 + w[0] * MIN, T0 + w[1] * MIN))


# ---- the pure report ------------------------------------------------------------------------------------
@given(audit_trails(), windows, st.sampled_from(SCOPES))
def test_totals_and_deletions_equal_a_brute_force_sum(rows: list[dict[str, Any]], window: tuple[int, int],
                                                      scope: str | None) -> None:
    since, until = window
    report = build_report(rows, since_ms=since, until_ms=until, generated_ms=T0, scope=scope)
    document = report_document(report)
    expected = oracle(rows, since, until, scope)
    assert totals_of(document) == expected
    assert (document["totals"]["deletions"], document["totals"]["bytes"]) == (
        sum(c for c, _ in expected.values()), sum(b for _, b in expected.values()))
    assert [d["id"] for d in document["deletions"]] == sorted(
        r["id"] for r in rows if r["action"] in FAMILY and FAMILY[r["action"]] in expected
        and since <= r["time_ms"] <= until and (scope is None or r["target"].startswith(scope + "/")))


@st.composite
def hold_histories(draw: st.DrawFn) -> tuple[list[HoldEvent], list[list[Any]]]:
    """A trail of holds added and removed, an id given again once its hold is removed (as SQLite
    does), and the lives it records: [hold id, reason, added ms, removed ms or None]."""
    events: list[HoldEvent] = []
    lives: list[list[Any]] = []
    open_lives: dict[int, list[Any]] = {}
    minute = 0
    for row in range(1, draw(st.integers(0, 14)) + 1):
        minute += draw(st.integers(0, 5))  # several changes in one minute too
        hold_id, at = draw(st.integers(1, 3)), T0 + minute * MIN
        if hold_id in open_lives:
            life = open_lives.pop(hold_id)
            life[3] = at
            events.append(HoldEvent(row, False, hold_id, "stream", f"s/{hold_id}", f"released hold {hold_id} "
                                    f"({life[1]})", at, "lifter"))
        else:
            open_lives[hold_id] = life = [hold_id, f"case {row}", at, None]
            lives.append(life)
            events.append(HoldEvent(row, True, hold_id, "stream", f"s/{hold_id}", f"case {row}", at, "holder"))
    return events, lives


@given(hold_histories(), windows)
def test_holds_in_force_are_the_lives_that_overlap_the_window(history: tuple[list[HoldEvent], list[list[Any]]],
                                                              window: tuple[int, int]) -> None:
    events, lives = history
    since, until = window
    expected = [(hold_id, reason, added, removed) for hold_id, reason, added, removed in lives
                if added <= until and (removed is None or removed >= since)]
    found = holds_in_force(events, since, until)
    assert [(h.id, h.reason, h.added_ms, h.removed_ms) for h in found] == expected
    assert all(h.added_by == "holder" and h.removed_by == ("lifter" if h.removed_ms else None) for h in found)


def test_a_removal_whose_addition_is_not_in_the_trail_has_an_unknown_start() -> None:
    gone = HoldEvent(7, False, 3, "dataset", "web", "released hold 3 (case)", T0 + 10 * MIN, "lifter")
    (hold,) = holds_in_force([gone], T0, T0 + 10 * MIN)
    assert (hold.id, hold.kind, hold.added_ms, hold.added_by, hold.removed_ms) == (3, "dataset", None, None,
                                                                                   T0 + 10 * MIN)
    assert hold.covers == "every archive of dataset web, and its catalog record"
    assert holds_in_force([gone], T0 + 11 * MIN, T0 + 20 * MIN) == ()


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                               st.sampled_from(["chunks", "rules", "rows", "period", "archives", "job", "count",
                                                "consumption", "hold", "kind", "sealed_first", "0"]), inner,
                                               max_size=4), max_leaves=8)


@given(st.sampled_from(ACTIONS), json_values | st.text(max_size=8), st.none() | st.text(max_size=12))
@example("catalog_delete", {"period": [0, 10**30], "rules": {"1": {"rows": "x"}}}, '{"0": "x"}')
@example("truncate", {"consumption": {}, "chunks": None}, '{"99999999999999999999": 1}')
def test_any_recorded_details_make_a_deletion_or_none_never_an_error(action: str, details: Any,
                                                                     head: str | None) -> None:
    """A row written by an older version, or around tidekeep, is reported as it is, never fatal."""
    row = {"id": 1, "time_ms": T0, "action": action, "target": "a/s", "old_head": head, "new_head": head,
           "bytes_freed": 3, "reason": "retention above-max: x", "actor": "x", "row_hash": None,
           "details": details if isinstance(details, str) else json.dumps(details)}
    report = build_report([row], since_ms=T0, until_ms=T0, generated_ms=T0, hold_rows=[row])
    assert len(report.deletions) == (1 if action in FAMILY else 0)
    assert json.loads(json.dumps(report_document(report)))["totals"]["bytes"] == (3 if action in FAMILY else 0)


def test_a_window_is_checked_before_anything_is_read() -> None:
    for since, until, fragment in ((5, 4, "is after until"), (-1, 4, "invalid since"),
                                   (0, LAST_MS + 1, "invalid until")):
        with pytest.raises(InvalidInput, match=fragment):
            check_window(since, until)
    check_window(0, LAST_MS)


def test_why_of_the_families_that_record_a_setting_or_rules() -> None:
    # the reason and details as catalog/job.py, archives/gc*.py and catalog/purge.py write them
    assert why_of("catalog_delete", "retention rules v3: 5 record(s) ...",
                  {"rules": {"10": {"rows": 2, "bytes": 1}, "2": {"rows": 3, "bytes": 1}}}) == (
        why_of("catalog_delete", "retention rules v3: 5 record(s) ...", {"rules": {"2": {}, "10": {}}}))
    assert why_of("catalog_delete", "x", {"rules": {"10": {}, "2": {}}}).rule == "rules 2, 10"
    assert (why_of("catalog_delete", "x", {}).kind, why_of("catalog_delete", "x", None).rule) == ("rule", None)
    for action, setting in (("archive_expire", "archive_output.retention_period"),
                            ("search_results_expire", "results_cache.retention_period"),
                            ("catalog_purge", "catalog.purge_age")):
        why = why_of(action, "because", {})
        assert (why.kind, why.rule, why.reason) == ("policy", setting, "because")
    assert why_of("truncate", "retention above-max: ...", "not json").kind == "policy"  # a row before the mark
    # a cycle's mark decides, whatever the reason says
    assert why_of("truncate", "odd", {"retention": {"rule": "no-max"}}) == Why("policy", "no-max", "odd")
    assert why_of("truncate", "retention above-max: x", {"retention": {"rule": "between-limits"},
                                                         "consumption": {}}).rule == "between-limits"
    assert why_of("truncate", "GDPR request 7", {"chunks": 2}).kind == "manual"


# ---- the reader, on SQLite and PostgreSQL ----------------------------------------------------------------
@pytest.fixture
def mclient(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), create=True,
                   settings={"writer.linger": 0, "retention.frequency": "10m", "archive_output.retention_period": 60})
    yield c
    c.close()


def manual_clock(client: tk.Client) -> tk.ManualClock:
    assert isinstance(client.clock, tk.ManualClock)
    return client.clock


def seed_trail(client: tk.Client) -> None:
    """Real truncations, a deletion and holds, then rows of every action at times out of id order."""
    clock = manual_clock(client)
    for name in ("a/s1", "ab/x", "b/s1"):
        client.create_stream(name)
        with client.stream(name).writer("w") as writer:
            writer.write_many([name.encode() * 9] * 4)
        clock.advance(MIN)
        client.stream(name).truncate(client.stream(name).tail_cut(), reason="emptied")
    client.holds.remove(client.holds.add("stream", "a/s1", "case A"))
    client.stream("ab/x").delete(force=True)
    log = client.workspace.audit
    with client.workspace.db.write() as conn:
        for i in range(36):
            log.append(conn, AuditEntry(ACTIONS[i % len(ACTIONS)], TARGETS[i % len(TARGETS)], f"seeded {i}",
                                        bytes_freed=(i * 7919) % 5000, time_ms=T0 + ((i * 37) % 61) * MIN))


@pytest.fixture
def seeded(mclient: tk.Client) -> tk.Client:
    seed_trail(mclient)
    return mclient


# the fixture is set up once for all the examples: they only read the trail it seeded
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(window=windows, scope=st.sampled_from(SCOPES))
def test_a_report_whose_totals_equal_the_audit_rows_in_its_window(seeded: tk.Client, window: tuple[int, int],
                                                                  scope: str | None) -> None:
    mclient = seeded
    rows = audit_rows(mclient.workspace.db, limit=10**6)
    assert len(rows) >= 36 + 6 and {r["action"] for r in rows} >= set(FAMILY)
    since, until = window
    report = read_deletion_report(mclient.workspace.db, since, until, T0 + 99 * MIN, scope)
    document = report_document(report)
    assert totals_of(document) == oracle(rows, since, until, scope)
    assert document["generated_ms"] == T0 + 99 * MIN
    # the deletions are the window's rows themselves, with their own chain hashes
    by_id = {r["id"]: r for r in rows}
    for deletion in document["deletions"]:
        row = by_id[deletion["id"]]
        assert (deletion["time_ms"], deletion["action"], deletion["target"], deletion["bytes"],
                deletion["reason"], deletion["actor"], deletion["row_hash"]) == (
            row["time_ms"], row["action"], row["target"], row["bytes_freed"], row["reason"], row["actor"],
            row["row_hash"])
    # signed with the newest row in the window, else the newest before its end
    inside = [r for r in rows if since <= r["time_ms"] <= until] or [r for r in rows if r["time_ms"] <= until]
    newest = max(inside, key=lambda r: r["id"]) if inside else None
    assert document["signature"] == ({"row_id": newest["id"], "row_hash": newest["row_hash"]} if newest
                                     else {"row_id": None, "row_hash": None})
    assert newest is None or len(newest["row_hash"]) == 64


def test_a_window_of_more_rows_than_a_page_is_read_whole(mclient: tk.Client) -> None:
    log = mclient.workspace.audit
    count = PAGE_ROWS * 2 + 17
    with mclient.workspace.db.write() as conn:
        for i in range(count):
            log.append(conn, AuditEntry(("truncate", "archive_expire", "catalog_purge")[i % 3],
                                        ("a/s", "archives/web", "catalog")[i % 3], "bulk", bytes_freed=i,
                                        time_ms=T0 + i))
    document = report_document(read_deletion_report(mclient.workspace.db, T0, T0 + count, T0))
    assert document["totals"] == {"deletions": count, "bytes": count * (count - 1) // 2}
    assert [d["id"] for d in document["deletions"]] == sorted(d["id"] for d in document["deletions"])
    assert len({d["id"] for d in document["deletions"]}) == count


def test_what_real_deletions_are_reported_as(mclient: tk.Client) -> None:
    clock = manual_clock(mclient)
    start = clock.now_ms()
    # a retention cycle: the retention set is recorded while a policy too large to act holds, then a
    # policy whose maximum the stream is over
    building = tk.RetentionPolicy.by_size(10**9)
    for name in ("r/policy", "r/subscribed"):
        mclient.create_stream(name, tk.StreamConfig(segments=1, retention=building))
    group = mclient.create_reader_group("billing", tk.ReaderGroupConfig(
        streams=["r/subscribed"], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    for _ in range(4):
        for name in ("r/policy", "r/subscribed"):
            with mclient.stream(name).writer("w") as writer:
                writer.write_many([b"e" * 92] * 10)
            mclient.stream(name).retention.run()
        clock.advance(11 * MIN)
    for name in ("r/policy", "r/subscribed"):
        mclient.stream(name).update(tk.StreamConfig(segments=1, retention=tk.RetentionPolicy.by_size(1_000, 2_000)))
    group.update_retention_stream_cut({"r/subscribed": "r/subscribed:0.0=2000"})
    policy_run = mclient.stream("r/policy").retention.run()
    subscribed_run = mclient.stream("r/subscribed").retention.run()
    assert policy_run.cut is not None and subscribed_run.cut is not None and subscribed_run.case is not None
    # by hand, as someone
    alice = tk.Client.over(mclient.workspace, actor="alice")
    alice.create_stream("m/by-hand")
    with alice.stream("m/by-hand").writer("w") as writer:
        writer.write_many([b"x" * 50] * 3)
    with pytest.raises(InvalidInput, match="a reason beginning 'retention RULE: ' is kept for retention cycles"):
        alice.stream("m/by-hand").truncate(alice.stream("m/by-hand").tail_cut(), reason="retention no-max: trust me")
    by_hand_run = alice.stream("m/by-hand").truncate(alice.stream("m/by-hand").tail_cut(), reason="GDPR request 7")
    assert by_hand_run.bytes_freed > 150  # the three events and their headers
    alice.stream("m/by-hand").delete(force=True)
    # an archive expiry and a catalog purge
    archive = make_archive(mclient, "web", [(start - 120 * MIN, "old"), (start - 119 * MIN, "older")])
    with mclient.workspace.db.write() as conn:
        conn.execute(sa.insert(catalog_records).values(
            feed="FEED", type="Raw Events", create_time=start - 400 * 86_400_000, status="DELETED",
            status_time=start - 30 * 86_400_000, file_size=100, location=None))
    assert collect_archives(mclient.workspace).deleted == 1  # it ended long before the 60 minutes
    mclient.catalog.purge()

    document = report_document(mclient.audit_report(start, clock.now_ms()))
    shown = {(d["action"], d["target"]): d for d in document["deletions"]}
    policy = shown[("truncate", "r/policy")]
    assert (policy["why"], policy["rule"], policy["bytes"]) == ("policy", policy_run.rule, policy_run.freed_bytes)
    assert policy["details"]["retention"] == {"rule": policy_run.rule}
    subscribed = shown[("truncate", "r/subscribed")]
    assert (subscribed["why"], subscribed["rule"]) == ("subscriber-bound", subscribed_run.rule)
    assert subscribed["details"]["consumption"]["subscribers"][0]["reader_group"] == "billing"
    by_hand = shown[("truncate", "m/by-hand")]
    assert (by_hand["why"], by_hand["rule"], by_hand["actor"], by_hand["reason"], by_hand["bytes"]) == (
        "manual", None, "alice", "GDPR request 7", by_hand_run.bytes_freed)
    deleted = shown[("delete_stream", "m/by-hand")]
    assert (deleted["why"], deleted["actor"], deleted["what"]) == (
        "manual", "alice", "stream m/by-hand and all its data (sealed first)")
    expired = shown[("archive_expire", "archives/web")]
    assert (expired["why"], expired["rule"], expired["bytes"]) == (
        "policy", "archive_output.retention_period", archive.stored_bytes)
    assert expired["what"] == "1 archive(s) of dataset web"
    purged = shown[("catalog_purge", "catalog")]
    assert (purged["why"], purged["rule"]) == ("policy", "catalog.purge_age")
    assert len(document["deletions"]) == 6


def test_the_holds_in_force_as_real_holds_come_and_go(mclient: tk.Client) -> None:
    clock = manual_clock(mclient)
    for name in ("a/s", "b/s"):
        mclient.create_stream(name)
    first = mclient.holds.add("stream", "a/s", "case 1")  # at T0
    clock.advance(10 * MIN)
    mclient.holds.remove(first)  # at T0 + 10 min
    clock.advance(10 * MIN)
    second = mclient.holds.add("stream", "b/s", "case 2")  # at T0 + 20 min
    third = mclient.holds.add("records", 'feed = "X"', "case 3")

    def held(since_min: int, until_min: int, scope: str | None = None) -> list[tuple[int, str | None]]:
        report = read_deletion_report(mclient.workspace.db, T0 + since_min * MIN, T0 + until_min * MIN, T0, scope)
        return [(h.id, h.removed_by and h.reason) for h in report.holds]

    assert held(0, 5) == [(first, "case 1")]
    assert held(10, 10) == [(first, "case 1")]  # removed at the window's first instant: in force then
    assert held(11, 19) == []
    assert held(15, 20) == [(second, None), (third, None)]
    assert held(0, 30) == [(first, "case 1"), (second, None), (third, None)]
    assert held(0, 30, "b") == [(second, None)]  # a scope sees its streams' holds only
    assert held(0, 30, "a") == [(first, "case 1")]
    document = report_document(read_deletion_report(mclient.workspace.db, T0, T0 + 30 * MIN, T0))
    assert [h["covers"] for h in document["holds"]] == [
        "the stream a/s: no truncation, no deletion", "the stream b/s: no truncation, no deletion",
        'catalog records matching feed = "X", and the archives filed as them']
    assert document["holds"][0]["added_ms"] == T0 and document["holds"][0]["removed_ms"] == T0 + 10 * MIN
    assert json.loads(json.dumps(document)) == document
