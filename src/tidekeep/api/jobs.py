"""Long work started through the API: it runs on a small thread pool and `GET /api/v1/jobs/{id}`
reports its state and progress (docs/api.md, "Jobs").

Jobs live in the memory of the server process that started them: a restart forgets them (the work
itself — a catalog run, a search — keeps its own record in the store), and the newest
`KEPT` finished jobs are remembered."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..clock import Clock
from ..errors import NotFound, TidekeepError
from .problems import problem, problem_of

KEPT = 1000
STATES = ("queued", "running", "succeeded", "failed")


@dataclass
class Progress:
    """What a running job reports: `done` of `total` units (None: not known yet) and a message."""

    done: int = 0
    total: int | None = None
    message: str = ""


@dataclass
class Job:
    id: str
    kind: str
    actor: str
    created_ms: int
    scope: str | None = None  # the scope of the token that started it: only that scope's callers see it
    state: str = "queued"
    started_ms: int | None = None
    finished_ms: int | None = None
    progress: Progress = field(default_factory=Progress)
    result: Any = None
    error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "actor": self.actor, "state": self.state,
                "created_ms": self.created_ms, "started_ms": self.started_ms, "finished_ms": self.finished_ms,
                "progress": {"done": self.progress.done, "total": self.progress.total,
                             "message": self.progress.message},
                "result": self.result, "error": self.error}


ProgressCallback = Callable[[int, "int | None", str], None]
Work = Callable[[ProgressCallback], Any]


class JobRegistry:
    def __init__(self, clock: Clock, workers: int = 2) -> None:
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="api-job")
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()

    def submit(self, kind: str, actor: str, work: Work, scope: str | None = None) -> Job:
        """Queue `work(progress)`; its return value (JSON-able) becomes the job's result."""
        job = Job(uuid.uuid4().hex, kind, actor, self.clock.now_ms(), scope)
        with self._lock:
            self._jobs[job.id] = job
            self._forget_old()
        self._pool.submit(self._run, job, work)
        return job

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFound(f"job {job_id!r} does not exist (jobs live in the server process that started them)")
        return job

    def list(self) -> list[Job]:
        with self._lock:
            return list(reversed(self._jobs.values()))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self, job: Job, work: Work) -> None:
        def progress(done: int, total: int | None, message: str = "") -> None:
            job.progress = Progress(done, total, message)

        job.state, job.started_ms = "running", self.clock.now_ms()
        try:
            result = work(progress)
        except TidekeepError as exc:
            job.error, job.state = problem_of(exc), "failed"
        except Exception as exc:  # a defect: the job says so instead of vanishing
            job.error = problem(500, "InternalError", f"{type(exc).__name__}: {exc}")
            job.state = "failed"
        else:
            job.result, job.state = result, "succeeded"
        finally:
            job.finished_ms = self.clock.now_ms()

    def _forget_old(self) -> None:
        finished = [j.id for j in self._jobs.values() if j.finished_ms is not None]
        for job_id in finished[: max(0, len(finished) - KEPT)]:
            del self._jobs[job_id]
