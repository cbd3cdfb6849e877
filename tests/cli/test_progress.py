"""Progress of long work: the Spark fraction (stages weighted the same, unsubmitted ones not
started) against a brute-force oracle, the units shown, the bar on a real terminal only, and one
real `catalog impact` run on Spark whose progress events are captured."""

from __future__ import annotations

import io
import itertools
import os
import select
import sys
from datetime import UTC, datetime
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.catalog.ages import Age
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.cli.progress import progress_bar, progress_text
from tidekeep.spark.progress import StageTasks, monotonic, stage_fraction, units_done

stage = st.one_of(st.none(), st.integers(0, 50).flatmap(
    lambda total: st.builds(StageTasks, st.just(total), st.integers(0, total))))


def oracle(stages: list[StageTasks | None]) -> Fraction | None:
    if not stages:
        return None
    done = Fraction(0)
    for s in stages:
        if s is not None:
            done += Fraction(1) if s.total == 0 else Fraction(s.completed, s.total)
    return done / len(stages)


@given(st.lists(stage, max_size=8))
def test_stage_fraction_is_the_mean_of_the_stages_done(stages: list[StageTasks | None]) -> None:
    fraction, expected = stage_fraction(stages), oracle(stages)
    if expected is None:
        assert fraction is None
        return
    assert fraction is not None and 0.0 <= fraction <= 1.0
    assert abs(Fraction(fraction) - expected) < Fraction(1, 10**9)
    # finished only when every stage is submitted and complete: never 100 % while one waits
    assert (fraction == 1.0) == all(s is not None and s.completed == s.total for s in stages)


@given(st.lists(stage, min_size=1, max_size=8), st.data())
def test_more_completed_tasks_never_lower_the_fraction(stages: list[StageTasks | None], data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(stages) - 1))
    before = stages[i]
    total = before.total if before is not None else data.draw(st.integers(0, 50))
    done = data.draw(st.integers(before.completed if before is not None else 0, total))
    later = [*stages[:i], StageTasks(total, done), *stages[i + 1:]]
    assert stage_fraction(later) >= stage_fraction(stages)  # type: ignore[operator]


@given(st.floats(0, 1), st.integers(0, 10**15))
def test_units_done_stays_within_the_total(fraction: float, total: int) -> None:
    n = units_done(fraction, total)
    assert 0 <= n <= total and (fraction < 1.0 or n == total)


@given(st.lists(st.integers(0, 100)))
def test_monotonic_progress_never_goes_back(values: list[int]) -> None:
    seen: list[int] = []
    report = monotonic(lambda done, _total: seen.append(done))
    for v in values:
        report(v, 100)
    assert seen == list(itertools.accumulate(values, max))


def test_progress_text_says_the_unit() -> None:
    assert progress_text(1200, 5000, "records") == "1,200 / 5,000 records"
    assert progress_text(3, 12, "files") == "3 / 12 files"
    assert progress_text(0, 1_572_864, "bytes") == "0 B / 1.5 MiB"
    assert progress_text(7, None, "archives") == "7 archives"


def test_the_bar_shows_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal: no bar, stdout untouched
    with progress_bar("impact", True) as update:
        assert update is None
    master, slave = os.openpty()  # a real terminal
    terminal = os.fdopen(slave, "w", buffering=1)
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "120")
    with progress_bar("impact", False) as update:  # --json
        assert update is None
    shown = ""
    with progress_bar("impact", True, unit="records") as update:
        assert update is not None
        update(1_500, 6_000)
        # the bar redraws from its own thread: wait for the line on the terminal, not for a time
        while "records" not in shown:
            ready, _, _ = select.select([master], [], [], 30)
            assert ready, f"no bar drawn: {shown!r}"
            shown += os.read(master, 65536).decode(errors="replace")
    terminal.close()
    os.close(master)
    assert "impact" in shown and "1,500 / 6,000 records" in shown


def test_catalog_impact_reports_progress_in_records(client: tk.Client, spark) -> None:
    now = int(datetime(2024, 3, 31, tzinfo=UTC).timestamp() * 1000)
    day = 86_400_000
    client.catalog.set_rules([RetentionRule(1, "short", True, parse('feed = "A"'), Age(2, "days")),
                              RetentionRule(2, "long", True, parse("all"), Age(30, "days"))])
    client.catalog.add([{"feed": feed, "type": "Raw", "create_time": now - d * day}
                        for feed in ("A", "B") for d in range(1, 41)])
    calls: list[tuple[int, int]] = []
    summary = client.catalog.impact(now_ms=now, progress=lambda done, total: calls.append((done, total)))
    candidates = 2 * 38  # scanned: every record created before the latest cutoff, now - 2 days (d = 3..40)
    assert calls[0] == (0, candidates) and calls[-1] == (candidates, candidates)
    assert {total for _, total in calls} == {candidates}
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(calls))
    assert sum(r.rows for r in summary.rows) == 38 + 10  # A older than 2 days; B older than 30
