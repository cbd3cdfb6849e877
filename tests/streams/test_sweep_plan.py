"""The orphan sweep's decision (streams/sweep_plan.py) against a brute-force oracle: a file goes
only when no metadata references it and its known modification time is at or before the cutoff;
a file of unknown age is kept and reported, never taken for an old one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidekeep.store.fileio import StoredFile
from tidekeep.streams.sweep_plan import plan_sweep

PATHS = st.sampled_from([f"streams/s/t-1/0.{i}/w-{j}.parquet" for i in range(2) for j in range(4)])
TIMES = st.one_of(st.none(), st.integers(min_value=0, max_value=100))  # None: the store gives no time
FILES = st.lists(st.builds(StoredFile, PATHS, TIMES, st.integers(min_value=0, max_value=10)),
                 max_size=10, unique_by=lambda f: f.path)


def _oracle(files: list[StoredFile], referenced: set[str], cutoff_ms: int) -> tuple[list[str], list[str]]:
    deleted, unknown = [], []
    for f in files:
        referenced_file = any(f.path == r for r in referenced)
        if not referenced_file and f.mtime_ms is None:
            unknown.append(f.path)
        elif not referenced_file and f.mtime_ms is not None and f.mtime_ms <= cutoff_ms:
            deleted.append(f.path)
    return deleted, unknown


@given(FILES, st.sets(PATHS), st.integers(min_value=-10, max_value=110))
def test_the_sweep_deletes_exactly_what_the_grace_rule_allows(files: list[StoredFile], referenced: set[str],
                                                              cutoff_ms: int) -> None:
    plan = plan_sweep(files, referenced, cutoff_ms)
    assert ([f.path for f in plan.doomed], [f.path for f in plan.unknown_age]) == _oracle(files, referenced, cutoff_ms)
    for doomed in plan.doomed:  # the safety property on its own: nothing of unknown age, nothing referenced
        assert doomed.mtime_ms is not None and doomed.mtime_ms <= cutoff_ms and doomed.path not in referenced


def test_a_file_with_no_time_is_kept_however_far_the_cutoff_and_a_file_at_time_zero_is_not() -> None:
    unknown, epoch = StoredFile("streams/a", None, 1), StoredFile("streams/b", 0, 1)
    plan = plan_sweep([unknown, epoch], set(), 10**15)
    assert (plan.doomed, plan.unknown_age) == ([epoch], [unknown])
