"""Ingest: compress text logs into archives of a dataset with a Spark job
(`client.archives.ingest`, `tidekeep archives ingest`).

1. Everything is validated first (dataset name, zone, timestamp format, paths); bad input is a
   typed error and nothing is written.
2. Group: the driver samples each file (its first 64 KiB for its first timestamp, a gzip file's
   trailer for its size) and cuts the files, ordered by time, into runs of about equal bytes, one
   per task (ingest_groups.py).
3. Parse and write: each task reads its files one after the other with Python (plain or gzip, told
   apart by the gzip magic bytes, not the name) in blocks, turns their lines into messages
   (messages.py, timestamps.py) and writes them into archive files with pyarrow
   (archive_writer.py) in a staging directory of this ingest; it returns their metadata. Messages
   without a timestamp go to archives of their own. No shuffle moves the messages between tasks:
   each file is read once, by one task, and its messages go straight into that task's archives, so
   the archives of different tasks can overlap in time where their files do. With `storage.fsync`
   (local storage) every file and its directory entries are on disk before the task returns.
4. A truncated or corrupt gzip fails the job with CorruptLogFile naming the file. Other tasks may
   still be writing then: the staging directory holds LIVE_MARKER while the ingest can still
   succeed, the driver takes it away first on failure, and a task's writers look for it before
   opening and after closing each archive file, removing what they wrote once it is gone
   (write_files).
5. The driver checks that every file a task reported is in the storage at the size the task wrote
   (StagedFileMissing otherwise: the task wrote where the driver cannot see), then moves the files
   to `archives/<dataset>/<id>.parquet` (with fsync it then syncs that directory, so the new names
   are on disk too) and registers every archive, with its catalog record and the audit entry, in
   ONE transaction (ArchiveStore.register). If anything fails before that commit, the files written
   so far are deleted, so a failed ingest leaves nothing behind (a process killed outright can leave
   unregistered files, never registered archives without files).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import logging
import os
import posixpath
import re
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidInput
from ..faults import fault_active, fault_point
from ..spark.session import check_job_reach
from ..spark.staged import StagedFile, describe_task, verify_staged
from ..store.fileio import FileIO
from ..store.inputs import InputFile, InputOpener, check_input_uri, given_inputs, list_inputs, locations_of
from .archive_writer import ArchiveWriter, IngestAbandoned, WrittenArchive, written_table
from .ingest_groups import FileSpan, file_groups, task_count
from .messages import BLOCK_BYTES, read_messages
from .model import ARCHIVE_SCHEMA, ARCHIVES_DIR, Archive, archive_path, check_dataset
from .timestamps import TimestampRules, make_rules, parse_timestamps

if TYPE_CHECKING:
    from ..store.house import Workspace

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

GZIP_MAGIC = b"\x1f\x8b"
ERROR_MARK = "tidekeep-ingest-error:"  # how an executor's input error reaches the driver through Spark
LIVE_MARKER = "_live"  # in the staging directory while the ingest can still succeed (write_files)

SAMPLE_BYTES = 64 << 10  # of each file's head, read on the driver to order the files by time
SURVEY_THREADS = 8  # files surveyed at once on the driver
WRITTEN_DDL = ("id STRING, file STRING, begin_ts BIGINT, end_ts BIGINT, message_count BIGINT, raw_bytes BIGINT, "
               "stored_bytes BIGINT, task STRING")
# the fault seam (TIDEKEEP_FAULT) that makes a write task put its archives in a directory private to its worker
PRIVATE_STORAGE_FAULT = "archive_ingest.private_storage"


class CorruptLogFile(InvalidInput):
    """A log file that cannot be read to its end (a truncated or corrupt gzip)."""


@dataclass(frozen=True)
class IngestReport:
    ingest_id: str
    dataset: str
    files: int
    messages: int
    messages_without_timestamp: int
    raw_bytes: int
    stored_bytes: int
    archives: list[Archive] = field(default_factory=list)
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"ingest_id": self.ingest_id, "dataset": self.dataset, "files": self.files,
                "messages": self.messages, "messages_without_timestamp": self.messages_without_timestamp,
                "raw_bytes": self.raw_bytes, "stored_bytes": self.stored_bytes,
                "archives": [a.to_dict() for a in self.archives], "elapsed_s": self.elapsed_s}


# ---- inputs ---------------------------------------------------------------------------------------


def expand_paths(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[InputFile]:
    """The files to ingest (store/inputs.py): each input is a file, or a directory (a prefix on an
    object store) whose files at any depth are taken in sorted order. A file named twice is read once."""
    return list_inputs(paths)


def gzip_raw_size(size: int, trailer: bytes) -> int:
    """Uncompressed size of a gzip file of `size` bytes ending in `trailer` (its last 4 bytes): at
    least the trailer's ISIZE (the size mod 2**32) and 3x the compressed size."""
    return max(int.from_bytes(trailer, "little"), size * 3)


class _Prefixed(io.RawIOBase):
    """A read stream that yields `head` (bytes already read from `rest`) before the rest: a
    sequential stream cannot seek back after the magic bytes are looked at."""

    def __init__(self, head: bytes, rest: Any) -> None:
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._head:
            count = min(len(view), len(self._head))
            view[:count] = self._head[:count]
            self._head = self._head[count:]
            return count
        data = self._rest.read(len(view))
        view[:len(data)] = data
        return len(data)


@contextlib.contextmanager
def open_log(file: InputFile, opener: InputOpener | None = None) -> Iterator[BinaryIO]:
    """A binary stream of the log's text, read front to back through FileIO (one streamed GET on
    an object store): gunzipped when the file starts with the gzip magic, whatever its name
    (concatenated gzip members are read one after the other, as gunzip does)."""
    opener = InputOpener() if opener is None else opener
    with opener.stream(file) as handle:
        head = bytes(handle.read(2))
        stream = io.BufferedReader(_Prefixed(head, handle), 1 << 20)
        if head != GZIP_MAGIC:
            yield stream  # type: ignore[misc]
            return
        with gzip.GzipFile(fileobj=stream, mode="rb") as unzipped:
            yield unzipped  # type: ignore[misc]


# ---- executor side --------------------------------------------------------------------------------


def _input_error(path: str, exc: BaseException) -> RuntimeError:
    reason = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, EOFError):
        reason = f"truncated gzip ({reason})"
    elif isinstance(exc, (gzip.BadGzipFile, zlib.error)):
        reason = f"corrupt gzip ({reason})"
    return RuntimeError(f"{ERROR_MARK} {path}: cannot read the log file: {reason}")


@dataclass(frozen=True)
class InputSurvey:
    """What the driver learns of one input file before the job: its uncompressed size (estimated
    for gzip) and its first timestamp (ingest_groups.py)."""

    raw_bytes: int
    span: FileSpan


def survey_input(file: InputFile, opener: InputOpener, rules: TimestampRules, directory: str) -> InputSurvey:
    """One random-access open of the file: its first SAMPLE_BYTES (gunzipped from the compressed
    bytes read when it starts with the gzip magic) give its first timestamp; a gzip file's trailer
    gives its size. A file that cannot be read goes without a timestamp here: the job fails on it,
    naming it (CorruptLogFile)."""
    raw_bytes = file.size
    head = b""
    try:
        with opener.random_access(file) as handle:
            head = bytes(handle.read(SAMPLE_BYTES))
            if head[:len(GZIP_MAGIC)] == GZIP_MAGIC:
                if file.size >= 18:  # the smallest gzip: a 10-byte header and an 8-byte trailer
                    handle.seek(file.size - 4)
                    raw_bytes = gzip_raw_size(file.size, bytes(handle.read(4)))
                head = zlib.decompressobj(wbits=31).decompress(head, SAMPLE_BYTES)
    except (EOFError, zlib.error, OSError):
        return InputSurvey(raw_bytes, FileSpan(raw_bytes, None, directory))
    stamps = _line_timestamps(head, rules)
    return InputSurvey(raw_bytes, FileSpan(raw_bytes, min(stamps) if stamps else None, directory))


def _line_timestamps(data: bytes, rules: TimestampRules) -> list[int]:
    """The timestamps at the start of the lines of `data`."""
    if not data:
        return []
    lines = data.decode("utf-8", "replace").split("\n")
    found = parse_timestamps(pa.array(lines, pa.string()), rules)
    return [value for value in found.to_pylist() if value is not None]


def survey_inputs(files: Sequence[InputFile], rules: TimestampRules) -> list[InputSurvey]:
    """survey_input for every file, a few at a time: on an object store each is a round trip."""
    opener = InputOpener()
    with ThreadPoolExecutor(max_workers=SURVEY_THREADS) as pool:
        return list(pool.map(lambda f: survey_input(f, opener, rules, posixpath.dirname(f.name)), files))


def _archive_rows(messages: pa.RecordBatch, source: pa.Scalar) -> pa.Table:
    """Messages (messages.MESSAGE_SCHEMA) as archive rows (ARCHIVE_SCHEMA) of one source file."""
    return pa.Table.from_arrays([messages.column("timestamp"), messages.column("message"),
                                 pa.repeat(source, messages.num_rows)], schema=ARCHIVE_SCHEMA)


def write_files(files: list[InputFile], rules: TimestampRules, block_bytes: int, storage: FileIO, staging: str,
                target_size: int, timezone: str | None) -> list[WrittenArchive]:
    """Read `files` one after the other and write their messages into archives in `staging`: one
    writer for the timestamped messages, one for those without (ArchiveWriter keeps the two apart).
    On any error every archive written so far is removed before it is raised. Once the driver has
    taken the staging directory's LIVE_MARKER away (the ingest failed in another task), the writers
    stop and what is left of the directory is removed."""
    opener = InputOpener()
    marker = f"{staging}/{LIVE_MARKER}"

    def marker_there() -> bool:
        return storage.exists(marker)

    # tests: a worker with a disk of its own never sees the marker; the driver's check of the
    # staged files is what names what it cannot find
    still_wanted = None if fault_active(PRIVATE_STORAGE_FAULT) else marker_there
    writers: dict[bool, ArchiveWriter] = {}
    try:
        for file in files:
            source = pa.scalar(file.name, pa.string())
            try:
                with open_log(file, opener) as stream:
                    for messages in read_messages(stream, rules, block_bytes):
                        has_ts = pc.is_valid(messages.column("timestamp"))
                        for with_ts, part in ((True, messages.filter(has_ts)),
                                              (False, messages.filter(pc.invert(has_ts)))):
                            if part.num_rows == 0:
                                continue
                            writer = writers.get(with_ts)
                            if writer is None:
                                writer = writers[with_ts] = ArchiveWriter(storage, staging, target_size, with_ts,
                                                                          timezone=timezone, still_wanted=still_wanted)
                            writer.write(_archive_rows(part, source), int(pc.sum(part.column("raw_bytes")).as_py()))
            except (EOFError, gzip.BadGzipFile, zlib.error, OSError, pa.ArrowException) as exc:
                raise _input_error(file.name, exc) from None
        return [archive for writer in writers.values() for archive in writer.close()]
    except BaseException as exc:
        for writer in writers.values():
            writer.abort()
        if isinstance(exc, IngestAbandoned):
            storage.discard_dir(staging)  # the ingest is gone: a directory this task recreated goes too
        raise


def write_groups(files: list[InputFile], groups: list[list[int]], rules: TimestampRules, block_bytes: int,
                 storage_uri: str, fsync: bool, staging: str, target_size: int, timezone: str | None,
                 batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: for each group number in the input rows, its files read and written into
    archives (write_files), through FileIO, here on the executor; yields the archives' metadata.
    `fsync` is the driver's storage.fsync setting (executors have no settings of their own);
    `timezone` is the ingest's zone when it read the built-in timestamp forms (ArchiveWriter)."""
    uri = storage_uri
    if fault_active(PRIVATE_STORAGE_FAULT):
        # tests: this task's worker has a disk of its own, as a worker isolated from the driver's
        uri = tempfile.mkdtemp(prefix="tidekeep-private-storage-")
    storage = FileIO(uri, fsync=fsync)
    for batch in batches:
        for group in batch.column(0).to_pylist():
            written = write_files([files[index] for index in groups[group]], rules, block_bytes, storage, staging,
                                  target_size, timezone)
            if written:
                table = written_table(written)
                task = pa.array([describe_task()] * table.num_rows, pa.string())
                yield table.append_column("task", task).to_batches()[0]


# ---- driver side ----------------------------------------------------------------------------------


def _spark_input_error(exc: BaseException) -> CorruptLogFile | None:
    match = re.search(re.escape(ERROR_MARK) + r" ([^\n]*)", str(exc))
    return CorruptLogFile(match.group(1).strip()) if match else None


def _run_job(workspace: Workspace, files: list[InputFile], groups: list[list[int]], rules: TimestampRules,
             storage_uri: str, fsync: bool, staging: str, target_size: int,
             on_fraction: Callable[[float], None]) -> list[dict[str, Any]]:
    from ..spark.progress import track_tasks
    from ..spark.session import get_spark

    spark = get_spark(workspace.settings)
    block_bytes = BLOCK_BYTES
    timezone = rules.timezone if rules.timestamp_format is None else None
    group_ids = spark.range(0, len(groups), 1, len(groups)).selectExpr("CAST(id AS INT) AS group_id")
    written = group_ids.mapInArrow(
        lambda it: write_groups(files, groups, rules, block_bytes, storage_uri, fsync, staging, target_size,
                                timezone, it), WRITTEN_DDL)
    with track_tasks(spark, f"tidekeep-ingest-{posixpath.basename(staging)}", on_fraction):
        rows = written.collect()
    return [row.asDict() for row in rows]


def _checked(workspace: Workspace, dataset: str, paths: Sequence[str | os.PathLike[str]], timezone: str,
             timestamp_format: str | None) -> tuple[str, list[str]]:
    """The dataset and inputs, checked as far as they can be without listing any input."""
    dataset = check_dataset(dataset)
    make_rules(timezone, timestamp_format)
    given = given_inputs(paths)
    for uri in given:
        check_input_uri(uri)
    # a local input on a cluster is refused before anything is listed (spark/cluster.py)
    check_job_reach(workspace.settings, storage=True, inputs=locations_of(given))
    return dataset, given


def check_ingest(workspace: Workspace, dataset: str, paths: Sequence[str | os.PathLike[str]], *,
                 timezone: str = "UTC", timestamp_format: str | None = None) -> None:
    """The refusals ingest_logs makes before it writes anything (a bad dataset name, zone or format,
    no inputs, an input carrying credentials or missing, inputs the executors could not reach), made
    without ingesting: the HTTP API refuses bad input at once instead of in a failed job."""
    _, given = _checked(workspace, dataset, paths, timezone, timestamp_format)
    expand_paths(given)


def ingest_logs(workspace: Workspace, dataset: str, paths: Sequence[str | os.PathLike[str]], *, timezone: str = "UTC",
                timestamp_format: str | None = None, progress: Progress | None = None) -> IngestReport:
    """Compress the log files at `paths` into archives of `dataset` (see the module docstring)."""
    began = time.perf_counter()
    dataset, given = _checked(workspace, dataset, paths, timezone, timestamp_format)
    now = workspace.clock.now_ms()
    rules = make_rules(timezone, timestamp_format, now)
    files = expand_paths(given)
    ingest_id = uuid.uuid4().hex
    if not files:
        return IngestReport(ingest_id, dataset, 0, 0, 0, 0, 0, [], time.perf_counter() - began)
    surveys = survey_inputs(files, rules)
    raw_estimate = sum(survey.raw_bytes for survey in surveys)

    from ..spark.progress import monotonic

    report_progress = monotonic(progress) if progress is not None else None
    if report_progress is not None:
        report_progress(0, raw_estimate)

    def on_fraction(fraction: float) -> None:
        if report_progress is not None:
            report_progress(int(fraction * raw_estimate), raw_estimate)

    target_size = int(workspace.settings["archives.target_size"])
    from ..spark.connect import default_parallelism
    from ..spark.session import job_spark

    # executors read the files, write archives; refused before anything is written, schema included
    spark = job_spark(workspace.settings, storage=True, inputs=locations_of(given), writes=True)
    workspace.db.ensure_schema()
    tasks = task_count(raw_estimate, target_size, default_parallelism(spark))
    groups = file_groups([survey.span for survey in surveys], tasks)
    storage_uri = workspace.storage.uri_of("")
    staging = f"{ARCHIVES_DIR}/{dataset}/_ingest-{ingest_id}"
    storage = workspace.storage
    moved: list[str] = []
    marker = f"{staging}/{LIVE_MARKER}"
    storage.write(marker, b"")
    try:
        try:
            written = _run_job(workspace, files, groups, rules, storage_uri, workspace.storage.fsync, staging,
                               target_size, on_fraction)
        except Exception as exc:
            typed = _spark_input_error(exc)
            if typed is not None:
                raise typed from None
            raise
        # every archive a task wrote must be where the driver registers it, at the size it wrote
        verify_staged(storage, [StagedFile(row["file"], row["stored_bytes"], row["task"]) for row in written])
        archives: list[Archive] = []
        for row in sorted(written, key=lambda r: (r["begin_ts"] is not None, r["begin_ts"] or 0, r["id"])):
            final = archive_path(dataset, row["id"])
            storage.move(row["file"], final, sync=False)  # the names are synced once, below
            moved.append(final)
            archives.append(Archive(row["id"], dataset, row["begin_ts"], row["end_ts"], row["message_count"],
                                    row["raw_bytes"], row["stored_bytes"], final, now, ingest_id))
        if moved:
            storage.sync_names(posixpath.dirname(moved[0]))
        from .store import ArchiveStore

        fault_point("archive_ingest.before_register")  # crash tests: files in place, nothing registered
        registered = ArchiveStore(workspace).register(archives, audit_reason=f"ingest {ingest_id}")
        fault_point("archive_ingest.after_register")
    except BaseException:
        # tasks still running see the marker gone and remove what they write after this; then the
        # staging directory and the moved files go (its own files, never registered); what a task
        # killed between writing a file and looking at the marker leaves, the orphan sweep removes
        storage.discard([marker])
        storage.discard(moved)
        raise
    finally:
        storage.discard_dir(staging)
    if report_progress is not None:
        report_progress(raw_estimate, raw_estimate)
    without_ts = sum(a.message_count for a in registered if a.end_ts is None)
    report = IngestReport(ingest_id, dataset, len(files), sum(a.message_count for a in registered), without_ts,
                          sum(a.raw_bytes for a in registered), sum(a.stored_bytes for a in registered), registered,
                          time.perf_counter() - began)
    log.info("ingest %s into %s: %d file(s), %d message(s), %d archive(s), %d -> %d bytes", ingest_id, dataset,
             report.files, report.messages, len(registered), report.raw_bytes, report.stored_bytes)
    return report


__all__ = ["CorruptLogFile", "IngestReport", "check_ingest", "expand_paths", "ingest_logs", "open_log",
           "write_files"]
