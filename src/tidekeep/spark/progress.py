"""Progress of Spark work for tidekeep's progress bars: the fraction of finished tasks of a job
group (the catalog job, the archive ingest), and a wrapper that never lets a bar go back."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Progress = Callable[[int, int], None]  # (done, total)


@contextmanager
def track_tasks(spark: SparkSession, group: str, on_fraction: Callable[[float], None]) -> Iterator[None]:
    """Report the fraction of finished tasks of the Spark jobs in `group` every half second."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    done = threading.Event()

    def poll() -> None:
        tracker = sc.statusTracker()
        while not done.wait(0.5):
            total = finished = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage:
                        total += stage.numTasks
                        finished += stage.numCompletedTasks
            if total:
                on_fraction(finished / total)

    thread = threading.Thread(target=poll, name="spark-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        sc.setLocalProperty("spark.jobGroup.id", None)


def monotonic(progress: Progress) -> Progress:
    """Progress that never goes back (Spark's task counts can grow as stages appear)."""
    best = [0]

    def report(done: int, total: int) -> None:
        best[0] = max(best[0], done)
        progress(best[0], total)

    return report
