"""The options of tidekeep's Spark sources and sink, checked without touching the workspace.

`spark.read`, `spark.readStream` (stream_source.py) and `df.write` / `df.writeStream` (sink.py)
all name a stream and where the workspace is; this module knows those option names, lower-cases
them as Spark does, refuses unknown ones with the list of known ones, and parses cuts. Pure: no
Spark session, no workspace (docs/spark.md, the "Options" of each direction).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInput, InvalidStreamCut
from ..names import split_stream_name
from ..streams.cuts import StreamCut
from ..units import parse_size_bytes
from .credentials import REFERENCE_OPTIONS, MetadataReference, metadata_reference, reference_from_options

SOURCE_NAME = "tidekeep"

# Logical bytes (8-byte header + payload per event) one partition reads at most, unless a single
# chunk is bigger. Large enough that per-task overhead is small, small enough to spread a segment.
PARTITION_TARGET_BYTES = 64 * 1024 * 1024

BATCH_ONLY = frozenset({"end"})
# options of spark.readStream only (stream_source.py); schema() accepts them, the batch reader refuses them
STREAM_ONLY = frozenset({"reader_group", "max_bytes_per_trigger", "on_truncated"})
# where the workspace is: the options every tidekeep source and the sink take; the metadata password
# only by reference (credentials.py)
WORKSPACE_OPTIONS = frozenset({"home", "metadata_url", "storage", "shared_filesystem", "fsync"}) | REFERENCE_OPTIONS
# the options of every read, batch or streaming
COMMON_OPTIONS = frozenset({"stream", "start", "partition_size", "path"}) | WORKSPACE_OPTIONS
KNOWN_READ_OPTIONS = COMMON_OPTIONS | BATCH_ONLY | STREAM_ONLY
HEAD, TAIL = "head", "tail"


CutSpec = StreamCut | str  # a parsed cut, or one of the words "head" and "tail"


@dataclass(frozen=True)
class ReadOptions:
    """The syntactically valid options of one read; `start`/`end` are cuts or "head"/"tail"."""

    stream: str
    start: CutSpec
    end: CutSpec
    home: str | None
    metadata: MetadataReference | None  # the metadata URL, its password by reference
    storage: str | None
    partition_size: int = PARTITION_TARGET_BYTES
    shared_filesystem: str | None = None  # the spark.shared_filesystem setting, as given
    fsync: str | None = None  # the storage.fsync setting (commits of reader-group positions), checked on connect


def checked_options(options: Mapping[str, str], known: Set[str], what: str,
                    hidden: frozenset[str] = frozenset({"path"})) -> tuple[dict[str, str], str]:
    """The options with lower-cased keys (Spark lower-cases them, so they compare case-insensitively)
    and the stream they name (`stream`, or the load()/save() path); unknown keys are refused, the
    message listing the known ones but `hidden` (those Spark passes itself)."""
    lowered = {str(k).lower(): v for k, v in options.items()}
    unknown = sorted(set(lowered) - known)
    if unknown:
        raise InvalidInput(f"unknown tidekeep {what} option {unknown[0]!r}; known: "
                           f"{', '.join(sorted(known - hidden))}")
    stream = lowered.get("stream") or lowered.get("path")
    if not stream:
        verb = "write" if what == "write" else "read"
        raise InvalidInput(f'tidekeep {verb} needs a stream: .option("stream", "scope/name")')
    split_stream_name(stream)
    return lowered, stream


def parse_read_options(options: Mapping[str, str], known: Set[str] | None = None) -> ReadOptions:
    """Check the options without touching the workspace: stream name, cut syntax, unknown keys.
    `known`: the option names allowed (default: a batch read's)."""
    known = COMMON_OPTIONS | BATCH_ONLY if known is None else known
    lowered, stream = checked_options(options, known, "read" if known & BATCH_ONLY else "streaming read")
    partition_size = PARTITION_TARGET_BYTES
    if lowered.get("partition_size"):
        partition_size = parse_size_bytes(lowered["partition_size"])
        if partition_size <= 0:
            raise InvalidInput(f"invalid partition_size {lowered['partition_size']!r}: must be greater than zero")
    return ReadOptions(stream, _parse_cut_option(lowered.get("start"), stream, "start", HEAD),
                       _parse_cut_option(lowered.get("end"), stream, "end", TAIL),
                       lowered.get("home") or None, reference_from_options(lowered),
                       lowered.get("storage") or None, partition_size, lowered.get("shared_filesystem") or None,
                       lowered.get("fsync") or None)


def _parse_cut_option(value: str | None, stream: str, which: str, default: str) -> CutSpec:
    if value is None or not value.strip():
        return default
    if value.strip().lower() in (HEAD, TAIL):
        return value.strip().lower()
    cut = StreamCut.parse(value)
    if cut.stream != stream:
        raise InvalidStreamCut(f"{which} cut is for {cut.stream!r}, not {stream!r}")
    return cut


def caller_options(options: Mapping[str, object], master: str) -> dict[str, str]:
    """Options as strings, with the workspace's paths made absolute here, in the caller's process:
    the Python worker Spark plans in, and the executors, may run in another directory or elsewhere.
    A `metadata_url` with a password becomes the URL without it and a reference to it that works
    on Spark master `master` (credentials.py)."""
    from ..config import absolute_metadata_url, absolute_storage_uri

    raw: dict[str, str] = {}
    for key, value in options.items():
        if value is None:
            continue
        if isinstance(value, StreamCut):
            raw[key] = value.to_json()
        elif key == "home":
            raw[key] = str(Path(str(value)).resolve())
        elif key == "metadata_url":
            raw.update(metadata_reference(absolute_metadata_url(str(value)), master).options())
        elif key == "storage":
            raw[key] = absolute_storage_uri(str(value))
        else:
            raw[key] = str(value)
    return raw


__all__ = ["BATCH_ONLY", "COMMON_OPTIONS", "HEAD", "KNOWN_READ_OPTIONS", "PARTITION_TARGET_BYTES", "SOURCE_NAME",
           "STREAM_ONLY", "TAIL", "WORKSPACE_OPTIONS", "CutSpec", "ReadOptions", "caller_options", "checked_options",
           "parse_read_options"]
