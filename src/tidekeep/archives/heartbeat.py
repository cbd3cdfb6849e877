"""The heartbeat of a running search job: a background thread that records, every
`search.heartbeat_interval`, that the searching process is alive (docs/archives-retention.md).

A process that dies outright (SIGKILL, power loss) stops beating; the archive collector then marks
its job FAILED once it has been silent for more than MISSED_HEARTBEATS intervals, so the job stops
holding archive expiry back long before `search.max_runtime`. The time written comes from the
client's clock; the thread only waits in real time between beats.
"""

from __future__ import annotations

import logging
import threading

from .store import SearchJobStore

log = logging.getLogger("tidekeep.archives.search")


class Heartbeat(threading.Thread):
    """Beats for one job until stopped, or until the job is no longer RUNNING (ended here or
    elsewhere: a heartbeat never brings an ended job back)."""

    def __init__(self, jobs: SearchJobStore, job_id: int, interval_ms: int) -> None:
        super().__init__(name=f"tidekeep-search-{job_id}-heartbeat", daemon=True)
        self.jobs, self.job_id, self.interval_s = jobs, job_id, interval_ms / 1000
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            try:
                if not self.jobs.heartbeat(self.job_id):
                    return  # the job has ended: there is nothing left to keep alive
            except Exception:  # a store hiccup: the next beat tries again, well within the allowed silence
                log.warning("search job %s: heartbeat failed", self.job_id, exc_info=True)

    def stop(self) -> None:
        self._stopped.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()


__all__ = ["Heartbeat"]
