"""Values of the archives family: archives, search jobs and their states, and where their files live.

Times are integer milliseconds since the epoch, UTC. An archive's `end_ts` is the newest log
timestamp it holds (CLP's archive timestamp); `None` means its messages carry no timestamps, and
such an archive never expires.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from ..integers import check_int64
from ..names import check_name
from ..store.layout import ARCHIVES_DIR, RESULTS_DIR

ARCHIVE_TYPE = "Archive"  # the catalog record type of an archive

if TYPE_CHECKING:
    import pyarrow as pa

    # built on first use by __getattr__ below: looking up archives (and registering their holds)
    # needs this module, not pyarrow
    ARCHIVE_SCHEMA: pa.Schema
    RESULT_SCHEMA: pa.Schema


def _archive_schema() -> pa.Schema:
    """One row per log message (a multi-line message is one row); sorted by timestamp within a file."""
    import pyarrow as pa

    return pa.schema([
        pa.field("timestamp", pa.int64()),  # ms UTC; null for a message without a timestamp
        pa.field("message", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # the log file the message came from
    ])


def _result_schema() -> pa.Schema:
    """The results cache: one Parquet file per searched archive under search-results/<job id>/."""
    import pyarrow as pa

    return pa.schema([
        pa.field("job_id", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64()),
        pa.field("message", pa.string(), nullable=False),
        pa.field("archive_id", pa.string(), nullable=False),
    ])


_SCHEMAS: dict[str, Callable[[], pa.Schema]] = {"ARCHIVE_SCHEMA": _archive_schema, "RESULT_SCHEMA": _result_schema}


def __getattr__(name: str) -> Any:
    build = _SCHEMAS.get(name)
    if build is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = schema = build()  # later lookups find it directly
    return schema


_ARCHIVE_ID = re.compile(r"[0-9a-f]{32}")


class JobState(enum.StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    KILLED = "KILLED"  # ran longer than search.max_runtime: no longer holds expiry


FINAL_STATES = frozenset(s for s in JobState if s is not JobState.RUNNING)


def check_dataset(name: object) -> str:
    return check_name(name, "dataset name")


def check_archive_id(archive_id: object) -> str:
    if not isinstance(archive_id, str) or not _ARCHIVE_ID.fullmatch(archive_id):
        raise InvalidInput(f"invalid archive id {archive_id!r}: expected 32 lowercase hex digits")
    return archive_id


def check_job_id(job_id: object) -> int:
    if isinstance(job_id, str) and job_id.strip().isdigit():
        job_id = int(job_id.strip())
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
        raise InvalidInput(f"invalid search job id {job_id!r}: expected a positive integer")
    return check_int64(job_id, "search job id")


def archive_path(dataset: str, archive_id: str) -> str:
    """Where an archive file lives, relative to the storage root."""
    return f"{ARCHIVES_DIR}/{dataset}/{archive_id}.parquet"


def results_dir(job_id: int) -> str:
    """Where a search job's results live, relative to the storage root."""
    return f"{RESULTS_DIR}/{job_id}"


@dataclass(frozen=True)
class Archive:
    id: str
    dataset: str
    begin_ts: int | None
    end_ts: int | None
    message_count: int
    raw_bytes: int
    stored_bytes: int
    path: str
    created_ms: int
    ingest_id: str
    catalog_record_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def dataset_summaries(names: list[str], archives: list[Archive]) -> list[dict[str, Any]]:
    """Per dataset (in the order of `names`): its archive count, messages, sizes and time span."""
    summary = []
    for name in names:
        mine = [a for a in archives if a.dataset == name]
        ends = [a.end_ts for a in mine if a.end_ts is not None]
        begins = [a.begin_ts for a in mine if a.begin_ts is not None]
        summary.append({"dataset": name, "archives": len(mine), "messages": sum(a.message_count for a in mine),
                        "raw_bytes": sum(a.raw_bytes for a in mine),
                        "stored_bytes": sum(a.stored_bytes for a in mine),
                        "begin_ts": min(begins) if begins else None, "end_ts": max(ends) if ends else None})
    return summary


@dataclass(frozen=True)
class SearchJob:
    id: int
    dataset: str
    query: str
    regex: bool
    ignore_case: bool
    begin_ts: int | None
    end_ts: int | None
    state: JobState
    created_ms: int
    completed_ms: int | None
    lower_bound_ms: int | None  # archives ending before this are never searched (None: no retention)
    archives_searched: int
    results_count: int
    results_path: str | None
    results_expired_ms: int | None
    error: str | None
    actor: str
    # when the searching process last said it is alive, and how often it promised to (ms); None for
    # a job from before heartbeats, which only search.max_runtime ends (docs/archives-retention.md)
    heartbeat_ms: int | None = None
    heartbeat_interval_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["state"] = str(self.state)
        return d
