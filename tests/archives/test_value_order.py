"""Format 3's value order (archives/value_order.py) against a brute-force layout: values grouped by
log type in order of first appearance, then by placeholder, then by row; stored and restored it is
the identity; log types number the same however the column is encoded."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidekeep.archives.template_encoding import CorruptEncoding
from tidekeep.archives.value_order import (
    RowLayout,
    StoredOrder,
    from_stored,
    log_type_groups,
    stored_positions,
    to_stored,
)


@st.composite
def row_groups(draw: st.DrawFn) -> tuple[list[str], list[list[int]]]:
    """Rows of a row group: each a log type and its values (as many as its log type has placeholders)."""
    kinds = draw(st.lists(st.text(alphabet="ab\x11\x12", max_size=4), min_size=1, max_size=5, unique=True))
    width = {kind: draw(st.integers(0, 3)) for kind in kinds}
    chosen = draw(st.lists(st.sampled_from(kinds), max_size=40))
    values = [[draw(st.integers(-5, 5)) for _ in range(width[kind])] for kind in chosen]
    return chosen, values


def brute_force_order(logtypes: list[str], values: list[list[int]]) -> list[int]:
    order = list(dict.fromkeys(logtypes))  # log types by first appearance
    stored = []
    for kind in order:
        rows = [r for r, k in enumerate(logtypes) if k == kind]
        for place in range(len(values[rows[0]])):
            stored += [values[r][place] for r in rows]
    return stored


@given(row_groups())
def test_values_are_stored_by_log_type_then_placeholder_and_restored(case: tuple[list[str], list[list[int]]]) -> None:
    logtypes, values = case
    lists = pa.array(values, pa.list_(pa.int64()))
    groups = log_type_groups(pa.array(logtypes, pa.string()))
    stored = to_stored(lists, RowLayout.of(groups))
    assert stored.offsets.to_pylist() == lists.offsets.to_pylist()  # every row keeps its length
    assert stored.values.to_pylist() == brute_force_order(logtypes, values)
    assert from_stored(stored, RowLayout.of(groups)).to_pylist() == values
    positions = stored_positions(groups, np.asarray(lists.offsets.to_numpy(), dtype=np.int64))
    assert sorted(positions.tolist()) == list(range(sum(map(len, values))))


@given(row_groups(), st.randoms(use_true_random=False))
def test_log_types_number_by_first_appearance_however_encoded(case: tuple[list[str], list[list[int]]],
                                                               random) -> None:
    logtypes, _ = case
    expected = [list(dict.fromkeys(logtypes)).index(k) for k in logtypes]
    dense = pa.array(logtypes, pa.string())
    assert log_type_groups(dense).tolist() == expected
    # a dictionary in any order, with a value under two indices, and chunked
    dictionary = [*dict.fromkeys(logtypes), "zz"]
    random.shuffle(dictionary)
    dictionary.append(dictionary[0])
    indices = [dictionary.index(k) if random.random() < 0.5 else len(dictionary) - 1 - dictionary[::-1].index(k)
               for k in logtypes]
    encoded = pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(dictionary, pa.string()))
    assert log_type_groups(encoded).tolist() == expected
    unique = pa.DictionaryArray.from_arrays(pa.array([dictionary.index(k) for k in logtypes], pa.int32()),
                                            pa.array(dictionary[:-1], pa.string()))
    assert log_type_groups(unique).tolist() == expected
    half = len(logtypes) // 2
    assert log_type_groups(pa.chunked_array([dense[:half], dense[half:]], pa.string())).tolist() == expected


def test_rows_of_one_log_type_with_different_numbers_of_values_are_corrupt() -> None:
    lists = pa.array([[1, 2], [3]], pa.list_(pa.int64()))
    layout = RowLayout.of(log_type_groups(pa.array(["a \x11 \x11", "a \x11 \x11"])))
    with pytest.raises(CorruptEncoding, match="row 1: 1 values where its log type's other rows hold 2"):
        from_stored(lists, layout)


def test_sliced_lists_are_read_where_their_slice_is() -> None:
    lists = pa.array([[9], [1, 2], [3, 4], [5]], pa.list_(pa.int64())).slice(1, 2)
    layout = RowLayout.of(log_type_groups(pa.array(["t", "t"])))
    stored = to_stored(lists, layout)
    assert stored.values.to_pylist() == [1, 3, 2, 4]
    assert from_stored(stored, layout).to_pylist() == [[1, 2], [3, 4]]


@st.composite
def wide_row_groups(draw: st.DrawFn) -> tuple[list[str], list[list[int]]]:
    """Rows of up to 14 log types: past StoredOrder's few-log-types path too."""
    kinds = [f"t{i}" for i in range(draw(st.integers(1, 14)))]
    width = {kind: draw(st.integers(0, 3)) for kind in kinds}
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=60))
    return chosen, [[draw(st.integers(-9, 9)) for _ in range(width[kind])] for kind in chosen]


@given(st.one_of(row_groups(), wide_row_groups()), st.data())
def test_stored_values_are_read_back_for_the_rows_and_values_asked(case: tuple[list[str], list[list[int]]],
                                                                    data: st.DataObject) -> None:
    logtypes, values = case
    column = pa.array(logtypes, pa.string())
    stored = to_stored(pa.array(values, pa.list_(pa.int64())), RowLayout.of(log_type_groups(column)))
    order = StoredOrder(column)
    # brute force: the row of every stored value, from where the layout puts row r's j-th value
    positions = stored_positions(log_type_groups(column), np.asarray(
        pa.array(values, pa.list_(pa.int64())).offsets.to_numpy(), dtype=np.int64))
    owner_of = np.empty(len(positions), dtype=np.int64)
    owner_of[positions] = np.repeat(np.arange(len(values)), [len(v) for v in values])
    asked = np.array(sorted(data.draw(st.sets(st.integers(0, max(0, len(positions) - 1)), max_size=10)))
                     if len(positions) else [], dtype=np.int64)
    assert order.owners(stored, asked).tolist() == owner_of[asked].tolist()
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, len(values) - 1), max_size=12)))
                    if values else [], dtype=np.int64)
    assert order.take(stored, rows).to_pylist() == [values[r] for r in rows.tolist()]


def test_stored_values_of_a_row_group_whose_log_type_rows_differ_are_corrupt() -> None:
    order = StoredOrder(pa.array(["a", "a"]))
    with pytest.raises(CorruptEncoding, match="row 1: 1 values"):
        order.take(pa.array([[1, 2], [3]], pa.list_(pa.int64())), np.array([0]))
