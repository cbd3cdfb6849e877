"""The purge loop's cursor (purge_plan.advance) against a brute-force oracle: run the loop over a
simulated catalog and compare with walking the eligible records in (status_time, id) descending
order in chunks of the batch size. (The location rules: test_catalog_purge_locations_properties.py.)"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.catalog import purge_plan
from tidekeep.catalog.purge_plan import PurgeCursor, advance


@dataclass(frozen=True)
class Row:
    id: int
    status_time: int
    fails: bool


rows_strategy = st.lists(st.tuples(st.integers(0, 30), st.booleans()), max_size=40).map(
    lambda items: [Row(i + 1, t, fails) for i, (t, fails) in enumerate(items)])


def run_loop(rows: list[Row], threshold: int, batch_size: int, failure_threshold: int) -> tuple[set[int], PurgeCursor]:
    """The shell's loop with the database replaced by a list: fetch, delete the successes, advance."""
    alive = {r.id: r for r in rows}
    cursor = PurgeCursor(threshold)
    for _ in range(len(rows) + 2):  # every round deletes or excludes a whole full batch: this bounds it
        if cursor.done:
            break
        candidates = [r for r in alive.values() if r.status_time <= cursor.threshold_ms and r.id not in cursor.excluded]
        batch = sorted(candidates, key=lambda r: (r.status_time, r.id), reverse=True)[:batch_size]
        failed = [r.id for r in batch if r.fails]
        for r in batch:
            if not r.fails:
                del alive[r.id]
        cursor = advance(cursor, [r.status_time for r in batch], failed, batch_size, failure_threshold)
    assert cursor.done, "the loop did not end"
    return {r.id for r in rows} - set(alive), cursor


def oracle(rows: list[Row], threshold: int, batch_size: int, failure_threshold: int) -> tuple[set[int], int, int, bool]:
    eligible = sorted((r for r in rows if r.status_time <= threshold), key=lambda r: (r.status_time, r.id),
                      reverse=True)
    deleted: set[int] = set()
    failures = batches = 0
    for start in range(0, len(eligible) + 1, batch_size):
        chunk = eligible[start:start + batch_size]
        if not chunk:
            break
        batches += 1
        deleted |= {r.id for r in chunk if not r.fails}
        failures += sum(r.fails for r in chunk)
        if failures > failure_threshold:
            return deleted, failures, batches, True
        if len(chunk) < batch_size:
            break
    return deleted, failures, batches, False


@settings(max_examples=400, deadline=None)
@given(rows_strategy, st.integers(-1, 31), st.integers(1, 7), st.integers(0, 6))
def test_the_loop_purges_exactly_what_the_oracle_says(rows: list[Row], threshold: int, batch_size: int,
                                                      failure_threshold: int) -> None:
    deleted, cursor = run_loop(rows, threshold, batch_size, failure_threshold)
    expected_deleted, failures, batches, aborted = oracle(rows, threshold, batch_size, failure_threshold)
    assert deleted == expected_deleted
    assert (cursor.failures, cursor.batches, cursor.aborted) == (failures, batches, aborted)
    assert all(r.status_time <= threshold for r in rows if r.id in deleted)
    if not aborted:  # everything old enough whose data could go, went
        assert deleted == {r.id for r in rows if r.status_time <= threshold and not r.fails}


def test_threshold_is_now_minus_the_purge_age() -> None:
    assert purge_plan.start(1_000_000, 7_000).threshold_ms == 993_000
