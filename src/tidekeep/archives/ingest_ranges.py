"""Where an ingest cuts its messages into time ranges, decided before any file is parsed in full
(pure: no store, storage or Spark).

Spark's `repartitionByRange` finds its bounds by running the whole job up to the exchange once to
sample keys, so every file would be parsed twice. Ingest instead samples each file cheaply on the
driver (the timestamps in its first and, for plain files, last 64 KiB) and cuts here:

- A file's messages are taken to spread evenly over its time span, from its first sampled timestamp
  to its last. A gzip file's end cannot be read without reading all of it, so its span ends where
  the next file of the same directory begins (rotated logs follow each other), or at its start.
- The bounds split the input's bytes into `partitions` equal shares over time. Where the estimate
  is off, a range gets more or less than its share: archives are then bigger or smaller, never
  wrong, since every message still lands in exactly one range and each range is sorted.
- Rows are placed with `repartition(n, bucket)`, which hashes the bucket with Spark's Murmur3
  (seed 42) modulo n. `bucket_labels` picks, for each range i, an integer whose hash lands in
  partition i, so every range gets its own partition (and task).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

SPARK_HASH_SEED = 42
_MASK = 0xFFFFFFFF


@dataclass(frozen=True)
class FileSpan:
    """What the driver's sample says about one input file."""

    raw_bytes: int
    first_ts: int | None  # None: no timestamp in its first block (the file counts as timestamp-less)
    last_ts: int | None  # the last timestamp of its tail (plain files), else None
    directory: str  # rotated logs of one source share a directory


def spans_over_time(files: Sequence[FileSpan]) -> list[tuple[int, int, int]]:
    """(begin, end, bytes) of every file with a timestamp, its end filled in as the module says."""
    timed = sorted((f for f in files if f.first_ts is not None), key=lambda f: (f.directory, f.first_ts))
    out: list[tuple[int, int, int]] = []
    for index, file in enumerate(timed):
        assert file.first_ts is not None
        end = file.last_ts
        if end is None:
            following = timed[index + 1] if index + 1 < len(timed) else None
            end = following.first_ts if following is not None and following.directory == file.directory else None
        begin = file.first_ts
        end = begin if end is None else max(begin, end)
        out.append((begin, end, file.raw_bytes))
    return out


def key_bounds(files: Sequence[FileSpan], partitions: int) -> list[int]:
    """partitions − 1 ascending timestamps: range i holds the keys k with bounds[i-1] <= k < bounds[i]
    (the first range also every key below, the last every key above). Empty when there is one
    range or nothing timed to cut."""
    spans = spans_over_time(files)
    total = sum(size for _, _, size in spans)
    if partitions <= 1 or total == 0:
        return []
    # the byte density over time is a sum of uniform pieces: sweep the points where it changes
    change: dict[int, float] = {}
    for begin, end, size in spans:
        rate = size / (end + 1 - begin)
        change[begin] = change.get(begin, 0.0) + rate
        change[end + 1] = change.get(end + 1, 0.0) - rate
    points = sorted(change)
    mass_before = [0.0]  # bytes at times < points[i]
    rate = 0.0
    for left, right in itertools.pairwise(points):
        rate += change[left]
        mass_before.append(mass_before[-1] + rate * (right - left))
    bounds: list[int] = []
    for share in range(1, partitions):
        target = total * share / partitions
        at = bisect.bisect_left(mass_before, target)
        if at == 0:
            bound = points[0]
        elif at >= len(points):
            bound = points[-1]
        else:
            left, right = points[at - 1], points[at]
            below, above = mass_before[at - 1], mass_before[at]
            fraction = (target - below) / (above - below) if above > below else 0.0
            bound = left + int(fraction * (right - left))
        bounds.append(max(bound, bounds[-1]) if bounds else bound)
    return bounds


def bucket_of(key: int, bounds: Sequence[int]) -> int:
    """The range of a key (the brute-force reading of `key_bounds`)."""
    return bisect.bisect_right(bounds, key)


def _rotate_left(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def spark_hash_int(value: int, seed: int = SPARK_HASH_SEED) -> int:
    """Spark's `hash()` of an INT (Murmur3_x86_32.hashInt): what HashPartitioning takes modulo n."""
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotate_left(k1, 15) * 0x1B873593 & _MASK
    h1 = (seed & _MASK) ^ k1
    h1 = (_rotate_left(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4  # the input's length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def bucket_labels(partitions: int) -> list[int]:
    """For each range i, the smallest non-negative INT that `repartition(partitions, col)` puts in
    partition i."""
    labels: dict[int, int] = {}
    value = 0
    while len(labels) < partitions:
        labels.setdefault(spark_hash_int(value) % partitions, value)  # Python's % is Spark's pmod here
        value += 1
    return [labels[i] for i in range(partitions)]


__all__ = ["FileSpan", "bucket_labels", "bucket_of", "key_bounds", "spans_over_time", "spark_hash_int"]
