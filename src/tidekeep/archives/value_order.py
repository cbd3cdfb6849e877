"""The order in which archive format 3 stores a row group's variables and numbers (pure).

Format 2 stores each row's values after the previous row's, so one column interleaves every
placeholder of every log type: an IP address, then a port, then a block id, then the next row's
user name. Format 3 keeps the rows and their list lengths as they are but stores the values as CLP
stores its tables per log type: grouped by log type (in the order each log type first appears in
the row group), and within a log type by placeholder, the first placeholder's values of all its
rows, then the second's, and so on. Values of one placeholder look alike (the same few hosts,
rising block ids, ports of one range), so zstd finds far more to share: on the HDFS benchmark
corpus the archives are 27 % smaller (docs/benchmarks.md, "Template-encoded archives").

Every row of a log type has the same number of values (the log type's placeholders), so the stored
position of row r's j-th value is `base[g] + j * rows[g] + rank[r]`: g is r's log type, base[g] the
values of the log types before it, rows[g] how many rows it has, rank[r] how many of them come
before r. Both sides compute it from the log types alone; nothing extra is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .template_encoding import CorruptEncoding


def log_type_groups(logtypes: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each row's log type as a group number: 0 for the first log type of the rows, 1 for the next
    new one, and so on (by value, however the column is encoded)."""
    if isinstance(logtypes, pa.ChunkedArray):
        logtypes = logtypes.combine_chunks() if logtypes.num_chunks != 1 else logtypes.chunk(0)
    if isinstance(logtypes, pa.DictionaryArray) \
            and pc.count_distinct(logtypes.dictionary).as_py() != len(logtypes.dictionary):
        logtypes = logtypes.dictionary.take(logtypes.indices)  # a value under two indices: by value
    if not isinstance(logtypes, pa.DictionaryArray):
        logtypes = pc.dictionary_encode(logtypes)  # indices in order of first appearance
        return np.asarray(logtypes.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    indices = np.asarray(logtypes.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    if not len(indices):
        return indices
    # a dictionary read from a file need not be in order of first appearance: renumber it. Each
    # entry's first row: assigned from the last row to the first, so with an index repeated the
    # earliest row is the last assignment, the one numpy keeps (unused entries keep len, and sort last)
    first_row = np.full(len(logtypes.dictionary), len(indices), dtype=np.int64)
    first_row[indices[::-1]] = np.arange(len(indices) - 1, -1, -1)
    number = np.empty(len(first_row), dtype=np.int64)
    number[np.argsort(first_row, kind="stable")] = np.arange(len(first_row))
    result: np.ndarray = number[indices]
    return result


@dataclass(frozen=True)
class RowLayout:
    """Where each row stands among the rows of its log type: computed once per row group, shared
    by its numbers and its variables."""

    groups: np.ndarray  # per row, its log type's group number (log_type_groups)
    rows_of: np.ndarray  # per group, its rows
    first_of: np.ndarray  # per group, where its rows begin in `order`
    order: np.ndarray  # the rows by group, each group's rows in row order
    rank: np.ndarray  # per row, the rows of its group before it

    @classmethod
    def of(cls, groups: np.ndarray) -> RowLayout:
        """From group numbers 0, 1, ... without gaps, as log_type_groups numbers them."""
        rows_of = np.bincount(groups) if len(groups) else np.zeros(0, dtype=np.int64)
        # radix sort when the group numbers fit 16 bits (numpy's stable sort of small integers)
        keys = groups.astype(np.uint16) if len(rows_of) <= 1 << 16 else groups
        order = np.argsort(keys, kind="stable")
        first_of = (np.cumsum(rows_of) - rows_of).astype(np.int64)
        rank = np.empty(len(groups), dtype=np.int64)
        rank[order] = np.arange(len(groups)) - np.repeat(first_of, rows_of)
        return cls(groups, rows_of, first_of, order, rank)

    def positions(self, offsets: np.ndarray) -> np.ndarray:
        """For each value in row order (the values of row r are offsets[r]:offsets[r+1], offsets
        from 0), where format 3 stores it. CorruptEncoding when two rows of one log type hold
        different numbers of values."""
        groups, counts = self.groups, np.diff(offsets)
        if not len(groups):
            return np.zeros(0, dtype=np.int64)
        _, base = _value_blocks(groups, self.rows_of, self.order[self.first_of], counts)
        rows_in_group = self.rows_of[groups]
        # value i of row r (offsets[r] <= i < offsets[r+1]) goes to base + (i - offsets[r]) * rows + rank
        start = base[groups] + self.rank - offsets[:-1] * rows_in_group
        positions: np.ndarray = np.repeat(start, counts) + np.arange(offsets[-1]) * np.repeat(rows_in_group, counts)
        return positions


def _value_blocks(groups: np.ndarray, rows_of: np.ndarray, first_rows: np.ndarray,
                  counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group, its rows' number of values (its first row's, in `first_rows`) and where its
    values begin in format 3's order; CorruptEncoding when two rows of one log type hold different
    numbers of values (`counts`: per row)."""
    per_row = counts[first_rows]
    if not np.array_equal(per_row[groups], counts):
        row = int(np.argmax(per_row[groups] != counts))
        raise CorruptEncoding(f"row {row}: {counts[row]} values where its log type's other rows hold "
                              f"{per_row[groups[row]]}")
    sizes = rows_of * per_row
    return per_row, np.cumsum(sizes) - sizes


def stored_positions(groups: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """RowLayout.positions for rows of these groups."""
    return RowLayout.of(groups).positions(offsets)


def _offsets(lists: pa.ListArray) -> np.ndarray:
    offsets = np.asarray(lists.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    return offsets - offsets[0]


def _values(lists: pa.ListArray) -> pa.Array:
    offsets = lists.offsets.to_numpy(zero_copy_only=False)
    return lists.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def to_stored(lists: pa.ListArray, layout: RowLayout) -> pa.ListArray:
    """Lists in row order → the same lists with their values in format 3's order."""
    offsets = _offsets(lists)
    positions = layout.positions(offsets)
    source = np.empty(len(positions), dtype=np.int64)
    source[positions] = np.arange(len(positions))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), _values(lists).take(pa.array(source)))


def from_stored(lists: pa.ListArray, layout: RowLayout) -> pa.ListArray:
    """Lists read from format 3 → their values back in row order (the inverse of to_stored)."""
    offsets = _offsets(lists)
    positions = layout.positions(offsets)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), _values(lists).take(pa.array(positions)))





FEW_GROUPS = 8  # log types whose rows are found by a scan each; with more, one sort of all rows


class StoredOrder:
    """A format 3 row group's values as stored, read back only where asked: which rows hold given
    stored values (a search's variable test), and the values of given rows in row order (the rows
    a search decodes). A selective search asks about a few rows of a few log types, so each of
    those log types' rows is found by one scan instead of sorting every row (RowLayout)."""

    def __init__(self, logtypes: pa.Array | pa.ChunkedArray) -> None:
        self.groups = log_type_groups(logtypes)
        self.rows_of = np.bincount(self.groups) if len(self.groups) else np.zeros(0, dtype=np.int64)
        # numbered by first appearance: a row is its group's first when its number is above all before it
        is_first = np.ones(len(self.groups), dtype=bool)
        is_first[1:] = self.groups[1:] > np.maximum.accumulate(self.groups)[:-1]
        self.first_rows = np.flatnonzero(is_first)  # entry g: the first row of group g
        self._layout: RowLayout | None = None

    def owners(self, lists: pa.ListArray, positions: np.ndarray) -> np.ndarray:
        """The rows holding the stored values at `positions` (of the lists' values, from 0)."""
        per_row, base = self._blocks(lists)
        if not len(positions):
            return np.zeros(0, dtype=np.int64)
        group = np.searchsorted(base + self.rows_of * per_row, positions, side="right")
        return self._kth_rows(group, (positions - base[group]) % self.rows_of[group])

    def take(self, lists: pa.ListArray, rows: np.ndarray) -> pa.ListArray:
        """The lists of `rows` (ascending row numbers), their values in row order."""
        per_row, base = self._blocks(lists)
        group = self.groups[rows]
        counts = per_row[group]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        start = base[group] + self._ranks(group, rows)
        step = np.repeat(self.rows_of[group], counts)
        placeholder = np.arange(offsets[-1]) - np.repeat(offsets[:-1], counts)
        positions = np.repeat(start, counts) + placeholder * step
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), _values(lists).take(pa.array(positions)))

    def _blocks(self, lists: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
        """Per group, its rows' number of values and where its values begin; CorruptEncoding when
        two rows of one log type hold different numbers of values."""
        return _value_blocks(self.groups, self.rows_of, self.first_rows, np.diff(_offsets(lists)))

    def _full(self) -> RowLayout:
        if self._layout is None:
            self._layout = RowLayout.of(self.groups)
        return self._layout

    def _kth_rows(self, group: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Row number of the k-th row of each group (0: its first)."""
        wanted = np.unique(group)
        if len(wanted) > FEW_GROUPS:
            layout = self._full()
            kth: np.ndarray = layout.order[layout.first_of[group] + k]
            return kth
        rows = np.empty(len(group), dtype=np.int64)
        for g in wanted.tolist():
            mine = group == g
            rows[mine] = np.flatnonzero(self.groups == g)[k[mine]]
        return rows

    def _ranks(self, group: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """How many rows of its group come before each of `rows`."""
        wanted = np.unique(group)
        if len(wanted) > FEW_GROUPS:
            rank: np.ndarray = self._full().rank[rows]
            return rank
        ranks = np.empty(len(rows), dtype=np.int64)
        for g in wanted.tolist():
            mine = group == g
            ranks[mine] = np.cumsum(self.groups == g)[rows[mine]] - 1
        return ranks

__all__ = ["RowLayout", "StoredOrder", "from_stored", "log_type_groups", "stored_positions", "to_stored"]
