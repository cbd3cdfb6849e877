"""One archive row group as a search reads it: the rows that may match, decoded (pure: an open
Parquet file in, an Arrow table out; search.py matches and writes them).

What is read, in order, so that a row group with nothing to decode costs little:
1. the timestamps, timestamp formats and log types; the time range and the log type tests of
   template_search.py rule rows out;
2. only if rows are left (or a test needs them: a word looked up among the dictionary variables),
   the numbers and variables; digit_filter.py compares the numbers a regex asks for;
3. the rows left are put back together (format 3: their values in row order) and decoded.
A format 1 row group is read whole: its messages are text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .archive_format import TEMPLATE_FORMATS, StoredRowGroup, as_messages, read_columns
from .digit_filter import DigitTest, digit_candidates, digit_tests
from .query import Matcher
from .template_search import TemplateFilter, template_filter
from .timerange import TimeRange

COLUMNS = ["timestamp", "message"]  # what a search returns of a row
FIRST_READ = ["timestamp", "timestamp_format", "logtype"]  # formats 2 and 3: what rules rows out first


@dataclass(frozen=True)
class RowGroupSearch:
    """A query's tests, for the row groups of one archive format."""

    archive_format: int
    time_range: TimeRange
    encoded_filter: TemplateFilter | None
    numeric_tests: tuple[DigitTest, ...]

    @classmethod
    def of(cls, archive_format: int, matcher: Matcher, time_range: TimeRange) -> RowGroupSearch:
        template = archive_format in TEMPLATE_FORMATS
        return cls(archive_format, time_range, template_filter(matcher) if template else None,
                   digit_tests(matcher) if template else ())

    def candidates(self, parquet: Any, group: int) -> pa.Table | None:
        """The rows of row group `group` of the open pq.ParquetFile that may match, as COLUMNS
        (message decoded); None when none may."""
        stored = read_columns(self.archive_format, COLUMNS)
        if self.archive_format not in TEMPLATE_FORMATS:
            table = parquet.read_row_group(group, columns=stored)
            keep = self._in_range(table)
            if not keep.any():
                return None
            return as_messages(self.archive_format, table.take(pa.array(np.flatnonzero(keep))), COLUMNS)
        first = parquet.read_row_group(group, columns=FIRST_READ)
        keep = self._in_range(first)
        whole: list[StoredRowGroup] = []

        def read_whole() -> StoredRowGroup:
            if not whole:
                rest = parquet.read_row_group(group, columns=[name for name in stored if name not in FIRST_READ])
                table = pa.Table.from_arrays(
                    [(first if name in FIRST_READ else rest).column(name) for name in stored], names=stored)
                whole.append(StoredRowGroup(self.archive_format, table))
            return whole[0]

        if self.encoded_filter is not None and keep.any():
            keep = self.encoded_filter.candidates(first.column("timestamp_format"), first.column("logtype"),
                                                  _variables_of(read_whole), among=keep)
        if not keep.any():
            return None
        read = read_whole()
        rows = np.flatnonzero(keep)
        if self.numeric_tests:
            parts = read.take(rows, ["timestamp_format", "logtype", "numbers"])
            rows = rows[digit_candidates(self.numeric_tests, parts.column("timestamp_format"),
                                         parts.column("logtype"), parts.column("numbers"))]
            if not len(rows):
                return None
        return as_messages(self.archive_format, read.take(rows), COLUMNS)

    def _in_range(self, table: pa.Table) -> np.ndarray:
        """Which rows' timestamps lie in the time range (all rows when it is unbounded)."""
        if not self.time_range.bounded:
            return np.ones(table.num_rows, dtype=bool)
        stamps = table.column("timestamp")
        in_range = pc.is_valid(stamps)
        if self.time_range.begin_ms is not None:
            in_range = pc.and_(in_range, pc.greater_equal(stamps, self.time_range.begin_ms))
        if self.time_range.end_ms is not None:
            in_range = pc.and_(in_range, pc.less_equal(stamps, self.time_range.end_ms))
        return np.asarray(pc.fill_null(in_range, False).to_numpy(zero_copy_only=False), dtype=bool)


def _variables_of(read_whole: Callable[[], StoredRowGroup]) -> Callable[[], tuple[Any, Any]]:
    """What gives the row group's variables and their owners, read when first asked for."""
    def variables() -> tuple[Any, Any]:
        read = read_whole()
        return read.table.column("variables"), read.variable_owners
    return variables


__all__ = ["COLUMNS", "RowGroupSearch"]
