"""Progress of Spark work for tidekeep's progress bars: the fraction of a job group's work done,
read from Spark's status tracker on a classic session, or from the progress a Spark Connect
server streams with each operation on a Connect session, which has no status tracker (the catalog
job, `catalog impact`, the archive ingest), turned
into the operation's own unit with a known total (records, bytes), and a wrapper that never lets a
bar go back.

The fraction weighs every stage of the group's jobs the same and counts a stage Spark has not
submitted yet as not started: a job whose first stage is done is not shown as finished while its
second has not begun (counting only the tasks of submitted stages would show 100 % there).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class StageTasks:
    """One submitted stage as Spark's status tracker reports it."""

    total: int  # numTasks
    completed: int  # numCompletedTasks


def stage_fraction(stages: Sequence[StageTasks | None]) -> float | None:
    """The fraction done of a group's stages (None: a stage not submitted yet); None if no stage is known."""
    if not stages:
        return None
    parts = [0.0 if s is None else 1.0 if s.total <= 0 else min(max(s.completed, 0), s.total) / s.total
             for s in stages]
    return sum(parts) / len(parts)


def units_done(fraction: float, total: int) -> int:
    """How many of `total` units (records, bytes) a fraction of the work stands for, within [0, total]."""
    return max(0, min(total, int(fraction * total)))


@contextmanager
def track_tasks(spark: SparkSession, group: str, on_fraction: Callable[[float], None]) -> Iterator[None]:
    """Report the fraction of finished tasks of the Spark jobs in `group` every half second (on a
    Connect session: of this session's operations, as the server reports them)."""
    from .connect import is_connect_session

    if is_connect_session(spark):
        with _track_connect_operations(spark, on_fraction):
            yield
        return
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    done = threading.Event()

    def poll() -> None:
        tracker = sc.statusTracker()
        while not done.wait(0.5):
            stages: list[StageTasks | None] = []
            try:
                for job_id in tracker.getJobIdsForGroup(group):
                    job = tracker.getJobInfo(job_id)
                    for stage_id in job.stageIds if job else ():
                        stage = tracker.getStageInfo(stage_id)
                        stages.append(None if stage is None else StageTasks(stage.numTasks, stage.numCompletedTasks))
            except Exception:  # the JVM went (Ctrl-C kills it): progress is a view, the job's own call reports
                return
            fraction = stage_fraction(stages)
            if fraction is not None:
                on_fraction(fraction)

    thread = threading.Thread(target=poll, name="spark-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # None removes it; the stub says str


@contextmanager
def _track_connect_operations(spark: SparkSession, on_fraction: Callable[[float], None]) -> Iterator[None]:
    """The Connect client calls a progress handler with the stages of the running operation each
    time the server reports; a stage the server has not started yet is not among them. A stage the
    server calls done counts as complete (a stage Spark skipped, its output reused, reports no
    completed task), and so does everything once the operation is done."""

    def handler(stages: Sequence[object] | None, inflight_tasks: int, operation_id: str | None,
                done: bool) -> None:
        if done:
            on_fraction(1.0)
            return
        known = []
        for stage in stages or ():
            total = int(getattr(stage, "num_tasks", 0))
            completed = total if getattr(stage, "done", False) else int(getattr(stage, "num_completed_tasks", 0))
            known.append(StageTasks(total, completed))
        fraction = stage_fraction(known)
        if fraction is not None:
            on_fraction(fraction)

    spark.registerProgressHandler(handler)  # type: ignore[arg-type]  # the ProgressHandler protocol
    try:
        yield
    finally:
        spark.removeProgressHandler(handler)  # type: ignore[arg-type]


def monotonic(progress: Progress) -> Progress:
    """Progress that never goes back (Spark's task counts can grow as stages appear)."""
    best = [0]

    def report(done: int, total: int) -> None:
        best[0] = max(best[0], done)
        progress(best[0], total)

    return report
