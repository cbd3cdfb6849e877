"""The purge's decisions as pure functions (docs/design/catalog.md#purge).

The shell (purge.py) fetches a batch of DELETED records with `status_time <= cursor.threshold_ms`,
not in `cursor.excluded`, newest first, deletes their data, deletes the rows of the successes and
asks `advance` what next. The threshold slides down to the oldest status time of the batch, so a
batch never re-reads what is younger than the last one; failed records are excluded by id so they
are not fetched again (their rows stay); the loop ends on a short batch or once failures exceed
the threshold. Every record of a full batch is either deleted or excluded, so each round makes
progress and the loop ends. Which locations may be deleted at all is decided in locations.py.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PurgeCursor:
    threshold_ms: int  # fetch records whose status_time is at or below this
    excluded: frozenset[int] = frozenset()  # ids whose data could not be deleted
    failures: int = 0
    batches: int = 0
    done: bool = False
    aborted: bool = False  # stopped because failures exceeded the threshold


def purge_threshold(now_ms: int, purge_age_ms: int) -> int:
    """Records DELETED at or before this time are old enough to purge."""
    return now_ms - purge_age_ms


def start(now_ms: int, purge_age_ms: int) -> PurgeCursor:
    return PurgeCursor(threshold_ms=purge_threshold(now_ms, purge_age_ms))


def advance(cursor: PurgeCursor, batch_status_times: Sequence[int], failed_ids: Collection[int],
            batch_size: int, failure_threshold: int) -> PurgeCursor:
    """The cursor after one batch: `batch_status_times` are the fetched records' status times,
    `failed_ids` those whose data could not be deleted."""
    if not batch_status_times:
        return PurgeCursor(cursor.threshold_ms, cursor.excluded, cursor.failures, cursor.batches, True, cursor.aborted)
    failures = cursor.failures + len(failed_ids)
    aborted = failures > failure_threshold
    return PurgeCursor(
        threshold_ms=min(batch_status_times),
        excluded=cursor.excluded | frozenset(failed_ids),
        failures=failures,
        batches=cursor.batches + 1,
        done=aborted or len(batch_status_times) < batch_size,
        aborted=aborted,
    )


__all__ = ["PurgeCursor", "advance", "purge_threshold", "start"]
