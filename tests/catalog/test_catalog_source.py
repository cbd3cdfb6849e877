"""The tidekeep_catalog Spark source: partition planning, and reads from SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.catalog.source import ScanStats, plan_ranges
from tidekeep.errors import InvalidInput
from tidekeep.spark.credentials import metadata_reference


@given(st.integers(0, 10_000), st.integers(0, 10_000), st.lists(st.integers(0, 20_000), max_size=40),
       st.integers(1, 16))
def test_ranges_are_disjoint_ascending_and_cover_every_row_of_the_period(a: int, b: int, times: list[int],
                                                                        partitions: int) -> None:
    from_ms, to_ms = min(a, b), max(a, b)
    inside = [t for t in times if from_ms <= t < to_ms]
    stats = ScanStats(len(inside), min(inside, default=None), max(inside, default=None))
    ranges = plan_ranges(from_ms, to_ms, stats, partitions)
    assert len(ranges) <= max(1, partitions) or not inside
    for (lo, hi), (next_lo, _) in itertools.pairwise(ranges):
        assert lo < hi == next_lo
    for t in inside:
        assert sum(lo <= t < hi for lo, hi in ranges) == 1
    assert all(from_ms <= lo and hi <= to_ms for lo, hi in ranges)


def metadata_options(client: tk.Client) -> dict[str, str]:
    """The catalog source's options for the client's store: the password by reference."""
    return metadata_reference(client.settings.metadata_url, "local[2]").options()


def _records(client: tk.Client) -> list[int]:
    return client.catalog.add([
        {"feed": "A", "type": "Raw Events", "create_time": 1_000 + i * 10, "file_size": i,
         "pipeline": None if i < 5 else f"p{i}", "attributes": {"k": str(i)} if i % 2 else {}}
        for i in range(12)])


def test_spark_reads_the_records_of_a_period_in_create_time_order(client: tk.Client, spark) -> None:
    ids = _records(client)
    client.catalog.records()  # the store is migrated
    frame = (spark.read.format("tidekeep_catalog").options(**metadata_options(client))
             .option("columns", "id,create_time,pipeline,attributes,status").option("from", "1020")
             .option("to", "1100").option("status", "UNLOCKED").option("partitions", "3").load())
    assert frame.columns == ["id", "create_time", "status", "pipeline", "attributes"]
    assert frame.rdd.getNumPartitions() == 3
    rows = frame.collect()
    assert [r["id"] for r in rows] == ids[2:10]
    assert [r["create_time"] for r in rows] == list(range(1020, 1100, 10))
    # a column that starts with NULLs keeps its type; attributes are the stored JSON text
    assert rows[0]["pipeline"] is None and rows[-1]["pipeline"] == "p9"
    assert json.loads(rows[1]["attributes"]) == {"k": "3"}


def test_an_empty_period_reads_no_rows(client: tk.Client, spark) -> None:
    _records(client)
    frame = (spark.read.format("tidekeep_catalog").options(**metadata_options(client))
             .option("from", "5000").option("to", "6000").load())
    assert frame.count() == 0


@pytest.mark.parametrize(("options", "message"), [
    ({"columns": "id,nope"}, "unknown catalog column(s) 'nope'"),
    ({"status": "GONE"}, "expected UNLOCKED, LOCKED or DELETED"),
    ({"from": "x"}, "'from': expected a whole number"),
    ({"from": "9", "to": "3"}, "'from' (9) is after 'to' (3)"),
    ({"colour": "red"}, "unknown catalog source option(s) 'colour'"),
])
def test_bad_options_are_typed_errors(sqlite_client: tk.Client, options: dict[str, str], message: str) -> None:
    from tidekeep.catalog.source import parse_options

    with pytest.raises(InvalidInput) as err:
        parse_options({"metadata_url": sqlite_client.settings.metadata_url, **options})
    assert message in str(err.value)
