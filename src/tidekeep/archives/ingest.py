"""Ingest: compress text logs into archives of a dataset with a Spark job
(`client.archives.ingest`, `tidekeep archives ingest`).

1. Everything is validated first (dataset name, zone, timestamp format, paths); bad input is a
   typed error and nothing is written.
2. Parse: one Spark task per input file reads it with Python (plain or gzip, told apart by the
   gzip magic bytes, not the name) in blocks and turns its lines into messages (messages.py,
   timestamps.py), handed to Spark as Arrow batches. A truncated or corrupt gzip fails the job
   with CorruptLogFile naming the file.
3. Timestamped messages are partitioned by time range and sorted within each partition; messages
   without a timestamp get keys below every timestamp (in file order), so they land in their own
   archives. The ranges are cut on the driver from a sample of each file's first and last lines
   (ingest_ranges.py), so every file is parsed once. The shuffle means every input is fully parsed
   before any archive is written: a bad file fails the job before any archive file exists.
4. Write: each partition's task writes archive files with pyarrow (archive_writer.py) into a
   staging directory of this ingest and returns their metadata. With `storage.fsync` (local
   storage) every file and its directory entries are on disk before the task returns.
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
import math
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidInput
from ..faults import fault_active, fault_point
from ..spark.session import check_job_reach
from ..spark.staged import StagedFile, describe_task, verify_staged
from ..store.fileio import FileIO
from ..store.inputs import InputFile, InputOpener, check_input_uri, given_inputs, list_inputs, locations_of
from .archive_writer import ArchiveWriter, written_table
from .ingest_ranges import FileSpan, bucket_labels, key_bounds
from .messages import BLOCK_BYTES, read_messages
from .model import ARCHIVE_SCHEMA, ARCHIVES_DIR, Archive, archive_path, check_dataset
from .timestamps import TimestampRules, make_rules, parse_timestamps

if TYPE_CHECKING:
    from ..store.house import Workspace

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

GZIP_MAGIC = b"\x1f\x8b"
ERROR_MARK = "tidekeep-ingest-error:"  # how an executor's input error reaches the driver through Spark
NO_TIMESTAMP_KEY_BASE = -(1 << 62)  # keys of timestamp-less messages: below every timestamp, in file order
FILE_KEY_SHIFT = 40  # up to 2**40 messages per file, 2**21 files per ingest
ASSUMED_COMPRESSION = 8  # text logs: raw bytes per stored byte, to size the range partitions
BIG_INPUT_PER_CORE = 64 << 20

# the parse tasks' output, as Arrow and as Spark sees it
PARSED_SCHEMA = pa.schema([
    pa.field("file", pa.int32()), pa.field("seq", pa.int64()), pa.field("key", pa.int64()),
    pa.field("timestamp", pa.int64()), pa.field("message", pa.string()), pa.field("raw_bytes", pa.int64()),
    pa.field("bucket", pa.int32()),  # the label of the key's time range (ingest_ranges.py)
])
PARSED_DDL = "file INT, seq BIGINT, key BIGINT, timestamp BIGINT, message STRING, raw_bytes BIGINT, bucket INT"
SAMPLE_BYTES = 64 << 10  # of each file's head and (plain files) tail, read on the driver to cut time ranges
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


def range_partitions(raw_bytes: int, target_size: int, parallelism: int) -> int:
    """How many range partitions (hence write tasks) an ingest uses. Each partition rolls its own
    archives at the target size and ends with one smaller archive, so more partitions than
    ceil(expected stored size / target) only make small archives; the stored size is estimated
    at 1/8 of the text. A big input (≥ 64 MiB of text per core) still uses every core, because
    writing (zstd) is then the slow part and archives of a quarter of the target are fine."""
    expected = math.ceil(raw_bytes / ASSUMED_COMPRESSION / target_size) if raw_bytes else 1
    count = max(1, expected)
    if raw_bytes >= BIG_INPUT_PER_CORE * parallelism:
        count = max(count, parallelism)
    return count


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
    for gzip) and its time span (ingest_ranges.py)."""

    raw_bytes: int
    span: FileSpan


def survey_input(file: InputFile, opener: InputOpener, rules: TimestampRules, directory: str) -> InputSurvey:
    """One random-access open of the file: its first SAMPLE_BYTES (gunzipped from the compressed
    bytes read when it starts with the gzip magic) and, for a plain file, its last SAMPLE_BYTES give
    the timestamps of its span; a gzip file's trailer gives its size. A file that cannot be read
    goes without a span here: the job's parse fails on it, naming it (CorruptLogFile)."""
    raw_bytes = file.size
    head = tail = b""
    gzipped = whole = False
    try:
        with opener.random_access(file) as handle:
            start = bytes(handle.read(SAMPLE_BYTES))
            gzipped = start[:len(GZIP_MAGIC)] == GZIP_MAGIC
            if gzipped:
                if file.size >= 18:  # the smallest gzip: a 10-byte header and an 8-byte trailer
                    handle.seek(file.size - 4)
                    raw_bytes = gzip_raw_size(file.size, bytes(handle.read(4)))
                head = zlib.decompressobj(wbits=31).decompress(start, SAMPLE_BYTES)
            else:
                head, whole = start, file.size <= SAMPLE_BYTES
                if not whole:
                    handle.seek(file.size - SAMPLE_BYTES)
                    tail = bytes(handle.read(SAMPLE_BYTES))
    except (EOFError, zlib.error, OSError):
        return InputSurvey(raw_bytes, FileSpan(raw_bytes, None, None, directory))
    head_stamps = _line_timestamps(head, rules, whole_lines_only=False)
    tail_stamps = _line_timestamps(tail, rules, whole_lines_only=True)
    first = min(head_stamps) if head_stamps else None
    last = max(head_stamps + tail_stamps) if head_stamps and (tail_stamps or whole) else None
    return InputSurvey(raw_bytes, FileSpan(raw_bytes, first, last, directory))


def _line_timestamps(data: bytes, rules: TimestampRules, whole_lines_only: bool) -> list[int]:
    """The timestamps at the start of the lines of `data`; with whole_lines_only its first piece is
    skipped (it may be the end of a line)."""
    if not data:
        return []
    lines = data.decode("utf-8", "replace").split("\n")
    if whole_lines_only:
        lines = lines[1:]
    found = parse_timestamps(pa.array(lines, pa.string()), rules)
    return [value for value in found.to_pylist() if value is not None]


def survey_inputs(files: Sequence[InputFile], rules: TimestampRules) -> list[InputSurvey]:
    """survey_input for every file, a few at a time: on an object store each is a round trip."""
    opener = InputOpener()
    with ThreadPoolExecutor(max_workers=SURVEY_THREADS) as pool:
        return list(pool.map(lambda f: survey_input(f, opener, rules, posixpath.dirname(f.name)), files))


def _labels(keys: pa.Array, bounds: np.ndarray, labels: np.ndarray) -> pa.Array:
    """Each key's range label (ingest_ranges.py)."""
    ranges = np.searchsorted(bounds, np.asarray(keys.to_numpy(zero_copy_only=False)), side="right")
    return pa.array(labels[ranges], pa.int32())


def parse_files(files: list[InputFile], rules: TimestampRules, block_bytes: int, bounds: list[int],
                labels: list[int], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: for each file index in the input rows, the file's messages (PARSED_SCHEMA),
    the file opened and read here, on the executor, through FileIO."""
    opener = InputOpener()
    bound_array, label_array = np.array(bounds, dtype=np.int64), np.array(labels, dtype=np.int32)
    for batch in batches:
        for index in batch.column(0).to_pylist():
            path = files[index].name
            try:
                with open_log(files[index], opener) as stream:
                    for messages in read_messages(stream, rules, block_bytes):
                        timestamps = messages.column("timestamp")
                        seq = messages.column("seq")
                        no_ts_key = pc.add(seq, NO_TIMESTAMP_KEY_BASE + (index << FILE_KEY_SHIFT))
                        key = pc.coalesce(timestamps, no_ts_key)
                        yield pa.RecordBatch.from_arrays(
                            [pa.array([index] * messages.num_rows, pa.int32()), seq, key, timestamps,
                             messages.column("message"), messages.column("raw_bytes"),
                             _labels(key, bound_array, label_array)], schema=PARSED_SCHEMA)
            except (EOFError, gzip.BadGzipFile, zlib.error, OSError, pa.ArrowException) as exc:
                raise _input_error(path, exc) from None


def write_partition(storage_uri: str, fsync: bool, staging: str, files: list[str], target_size: int,
                    timezone: str | None, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: write one sorted range partition into archives; yields their metadata.
    Keys of timestamp-less messages sort first, so the partition is at most one run of those
    followed by one run of timestamped messages; each run gets its own writer. `fsync` is the
    driver's storage.fsync setting (executors have no settings of their own); `timezone` is the
    ingest's zone when it read the built-in timestamp forms (ArchiveWriter)."""
    uri = storage_uri
    if fault_active(PRIVATE_STORAGE_FAULT):
        # tests: this task's worker has a disk of its own, as a worker isolated from the driver's
        uri = tempfile.mkdtemp(prefix="tidekeep-private-storage-")
    storage = FileIO(uri, fsync=fsync)
    sources = pa.array(files, pa.string())
    writers: dict[bool, ArchiveWriter] = {}
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            timestamps = batch.column("timestamp")
            source = pc.take(sources, batch.column("file"))
            has_ts = pc.is_valid(timestamps)
            for with_ts in (False, True):
                part = batch.filter(has_ts if with_ts else pc.invert(has_ts))
                if part.num_rows == 0:
                    continue
                part_source = source.filter(has_ts if with_ts else pc.invert(has_ts))
                # Spark may hand strings over as large_string (spark.sql.execution.arrow.useLargeVarTypes)
                table = pa.Table.from_arrays([part.column("timestamp"), part.column("message").cast(pa.string()),
                                              part_source], schema=ARCHIVE_SCHEMA)
                if with_ts and False in writers:
                    writers[False].close()  # all timestamp-less rows of the partition came first
                writer = writers.get(with_ts)
                if writer is None:
                    writer = writers[with_ts] = ArchiveWriter(storage, staging, target_size, with_ts, timezone=timezone)
                writer.write(table, int(pc.sum(part.column("raw_bytes")).as_py() or 0))
        written = [a for w in writers.values() for a in w.close()]
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    if written:
        table = written_table(written)
        task = pa.array([describe_task()] * table.num_rows, pa.string())
        yield table.append_column("task", task).to_batches()[0]


# ---- driver side ----------------------------------------------------------------------------------


def _spark_input_error(exc: BaseException) -> CorruptLogFile | None:
    match = re.search(re.escape(ERROR_MARK) + r" ([^\n]*)", str(exc))
    return CorruptLogFile(match.group(1).strip()) if match else None


def _run_job(workspace: Workspace, files: list[InputFile], rules: TimestampRules, storage_uri: str, fsync: bool,
             staging: str, partitions: int, bounds: list[int], target_size: int,
             on_fraction: Callable[[float], None]) -> list[dict[str, Any]]:
    from ..spark.progress import track_tasks
    from ..spark.session import get_spark

    spark = get_spark(workspace.settings)
    block_bytes = BLOCK_BYTES
    labels = bucket_labels(partitions)
    file_ids = spark.range(0, len(files), 1, len(files)).selectExpr("CAST(id AS INT) AS file")
    parsed = file_ids.mapInArrow(lambda it: parse_files(files, rules, block_bytes, bounds, labels, it), PARSED_DDL)
    # One pass: each file is parsed once, and its rows go to the partition of their time range, cut
    # on the driver from a sample (ingest_ranges.py). repartitionByRange would parse every file twice:
    # its exchange first runs the job up to it to sample the keys.
    ordered = parsed.repartition(partitions, "bucket").sortWithinPartitions("key", "file", "seq")
    names = [file.name for file in files]
    timezone = rules.timezone if rules.timestamp_format is None else None
    written = ordered.mapInArrow(
        lambda it: write_partition(storage_uri, fsync, staging, names, target_size, timezone, it), WRITTEN_DDL)
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
    partitions = range_partitions(raw_estimate, target_size, default_parallelism(spark))
    bounds = key_bounds([survey.span for survey in surveys], partitions) if partitions > 1 else []
    storage_uri = workspace.storage.uri_of("")
    staging = f"{ARCHIVES_DIR}/{dataset}/_ingest-{ingest_id}"
    storage = workspace.storage
    moved: list[str] = []
    try:
        try:
            written = _run_job(workspace, files, rules, storage_uri, workspace.storage.fsync, staging, partitions,
                               bounds, target_size, on_fraction)
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
        storage.discard(moved)  # its own files, never registered; what is left the orphan sweep removes
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
           "range_partitions"]
