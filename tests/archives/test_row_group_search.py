"""row_group_search: what a search reads of a row group, and what it decodes. A row group whose log
types rule every row out is never read past them; what is returned is exactly the rows that may
match, decoded as read_messages decodes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tidekeep.archives.archive_format import (
    DICTIONARY_COLUMNS,
    GROUPED_FORMAT,
    TEMPLATE_FORMAT,
    TEXT_FORMAT,
    encode_rows,
    read_messages,
    schema_of,
    writer_options,
)
from tidekeep.archives.model import ARCHIVE_SCHEMA
from tidekeep.archives.query import compile_query
from tidekeep.archives.row_group_search import FIRST_READ, RowGroupSearch
from tidekeep.archives.timerange import TimeRange

MESSAGES = [(1_000, "2024-07-01T00:00:01Z GET /a 200 took 12 ms"),
            (2_000, "2024-07-01T00:00:02Z POST /b 500 took 345 ms"),
            (3_000, "2024-07-01T00:00:03Z user=bob7 login"), (4_000, "2024-07-01T00:00:04Z disk 99.5% full")]


class Recording:
    """pq.ParquetFile's read_row_group, with the columns each call asked for written down."""

    def __init__(self, parquet: pq.ParquetFile) -> None:
        self.parquet, self.reads = parquet, []

    def read_row_group(self, group: int, columns: list[str]) -> pa.Table:
        self.reads.append(list(columns))
        return self.parquet.read_row_group(group, columns=columns)


def archive(tmp_path: Path, archive_format: int) -> Path:
    table = pa.Table.from_pydict({"timestamp": [m[0] for m in MESSAGES], "message": [m[1] for m in MESSAGES],
                                  "source": ["a.log"] * len(MESSAGES)}, schema=ARCHIVE_SCHEMA)
    path = tmp_path / f"format{archive_format}.parquet"
    if archive_format == TEXT_FORMAT:
        pq.write_table(table, path)
    else:
        with pq.ParquetWriter(path, schema_of(archive_format), compression="zstd",
                              **writer_options(archive_format)) as writer:
            writer.write_table(encode_rows(table, "UTC", archive_format))
    return path


def search(path: Path, archive_format: int, query: str, **how: Any) -> tuple[list[str] | None, list[list[str]]]:
    dictionaries = list(DICTIONARY_COLUMNS) if archive_format != TEXT_FORMAT else None
    parquet = Recording(pq.ParquetFile(path, read_dictionary=dictionaries))
    time_range = TimeRange(how.pop("begin", None), how.pop("end", None))
    found = RowGroupSearch.of(archive_format, compile_query(query, **how), time_range).candidates(parquet, 0)
    return (None if found is None else found.column("message").to_pylist()), parquet.reads


@pytest.mark.parametrize("archive_format", [TEMPLATE_FORMAT, GROUPED_FORMAT])
def test_a_row_group_ruled_out_by_its_log_types_is_read_no_further(tmp_path: Path, archive_format: int) -> None:
    path = archive(tmp_path, archive_format)
    assert search(path, archive_format, "PUT /") == (None, [FIRST_READ])
    assert search(path, archive_format, "GET /", begin=3_000) == (None, [FIRST_READ])  # the time range first
    # a word may be inside a dictionary variable: the variables are read, then nothing is left
    messages, reads = search(path, archive_format, "nobody")
    assert messages is None and reads == [FIRST_READ, ["numbers", "variables"]]


@pytest.mark.parametrize("archive_format", [TEMPLATE_FORMAT, GROUPED_FORMAT])
def test_the_rows_that_may_match_are_decoded(tmp_path: Path, archive_format: int) -> None:
    path = archive(tmp_path, archive_format)
    whole = read_messages(pq.ParquetFile(path)).column("message").to_pylist()
    assert search(path, archive_format, "took")[0] == [whole[0], whole[1]]
    assert search(path, archive_format, "bob7")[0] == [whole[2]]  # found among the variables
    assert search(path, archive_format, r"took \d{3}", regex=True)[0] == [whole[1]]  # numbers compared
    assert search(path, archive_format, r"took \d{4}", regex=True)[0] is None
    assert search(path, archive_format, "*", begin=2_000, end=3_000)[0] == whole[1:3]


def test_a_text_archive_is_read_whole(tmp_path: Path) -> None:
    path = archive(tmp_path, TEXT_FORMAT)
    messages, reads = search(path, TEXT_FORMAT, "PUT /")
    assert messages == [m for _, m in MESSAGES] and reads == [["timestamp", "message"]]  # matched by the caller
    assert search(path, TEXT_FORMAT, "*", begin=5_000) == (None, [["timestamp", "message"]])
    assert pc.count(pa.array(search(path, TEXT_FORMAT, "*", end=1_000)[0])).as_py() == 1
