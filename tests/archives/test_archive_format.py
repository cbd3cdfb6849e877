"""Archive formats (archives/archive_format.py): the format is read from each file; formats 2 and 3
give back every message byte for byte, whether written by the ingest job or directly, format 3 with
each row group's values in its own order; format 1 and 2 archives stay readable; a newer format is
refused naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.archives import archive_rows, make_archive
from tidekeep.archives.archive_format import (
    FORMAT_KEY,
    GROUPED_FORMAT,
    GROUPED_SCHEMA,
    TEMPLATE_FORMAT,
    TEMPLATE_SCHEMA,
    TEXT_FORMAT,
    UnknownArchiveFormat,
    encode_rows,
    format_of,
    read_messages,
    schema_of,
    writer_options,
)
from tidekeep.archives.ingest import open_log
from tidekeep.archives.messages import read_messages as messages_of_stream
from tidekeep.archives.model import ARCHIVE_SCHEMA
from tidekeep.archives.timestamps import make_rules
from tidekeep.store.inputs import list_inputs

ROOT = Path(__file__).resolve().parents[2]
STAMP = 1_728_309_336_123


def test_the_format_is_read_from_the_file() -> None:
    assert format_of(ARCHIVE_SCHEMA) == TEXT_FORMAT  # files written before formats were numbered
    assert format_of(TEMPLATE_SCHEMA) == TEMPLATE_FORMAT
    assert format_of(GROUPED_SCHEMA) == GROUPED_FORMAT
    with pytest.raises(UnknownArchiveFormat, match="archive format 4 is newer than this tidekeep reads"):
        format_of(TEMPLATE_SCHEMA.with_metadata({FORMAT_KEY: b"4"}))
    with pytest.raises(UnknownArchiveFormat, match="not a number"):
        format_of(TEMPLATE_SCHEMA.with_metadata({FORMAT_KEY: b"two"}))


texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
stamped = st.tuples(st.sampled_from(["2024-10-07T13:55:36.123Z ", "2024-10-07 13:55:36,123 ", "Oct  7 13:55:36 ",
                                     "1728309336123 ", "2024-10-07T13:55:36.123456Z ", ""]), texts)


rows_of_messages = st.lists(st.one_of(texts.map(lambda t: (None, t)), stamped.map(lambda p: (STAMP, p[0] + p[1]))),
                            max_size=20)


def archive_table(rows: list[tuple[int | None, str]], source: str = "a.log") -> pa.Table:
    rows = sorted(rows, key=lambda r: r[0] is None)  # in timestamp order, as archives hold them
    return pa.table({"timestamp": pa.array([r[0] for r in rows], pa.int64()), "message": [r[1] for r in rows],
                     "source": [source] * len(rows)}, schema=ARCHIVE_SCHEMA)


@pytest.mark.parametrize("archive_format", [TEMPLATE_FORMAT, GROUPED_FORMAT])
@given(rows=st.lists(rows_of_messages, min_size=1, max_size=3))
def test_template_rows_decode_to_the_messages(archive_format: int, rows: list[list[tuple[int | None, str]]]) -> None:
    """Each list of rows is one row group (format 3 orders each row group's values on its own)."""
    tables = [archive_table(group, f"{index}.log") for index, group in enumerate(rows)]
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, schema_of(archive_format), compression="zstd",
                          **writer_options(archive_format)) as writer:
        for table in tables:
            encoded = encode_rows(table, "UTC", archive_format)
            assert encoded.schema.equals(schema_of(archive_format), check_metadata=True)
            writer.write_table(encoded, row_group_size=max(1, table.num_rows))
    parquet = pq.ParquetFile(pa.BufferReader(sink.getvalue()))
    assert format_of(parquet.schema_arrow) == archive_format
    assert read_messages(parquet).equals(pa.concat_tables(tables))
    only = read_messages(parquet, columns=["message"])
    assert only.column("message").to_pylist() == [m for table in tables for m in table.column("message").to_pylist()]
    last = len(tables) - 1
    assert read_messages(parquet, row_groups=[last]).equals(tables[last])


def test_format_3_stores_each_placeholders_values_together() -> None:
    """What format 3 is for: the values of one placeholder of one log type sit side by side."""
    messages = [f"GET /item/{i} from host-{i % 3}x in {i * 7} ms" for i in range(6)]
    messages += [f"user u{i}a left after {i} s" for i in range(4)]
    table = archive_table([(STAMP, m) for m in messages])
    stored = encode_rows(table, "UTC", GROUPED_FORMAT)
    numbers = pc_flatten(stored.column("numbers"))
    variables = [v.decode() for v in pc_flatten(stored.column("variables"))]
    # rows 0-5 are one log type (path number, host, milliseconds), rows 6-9 another (user, seconds)
    assert numbers == [*range(6), *(i * 7 for i in range(6)), *range(4)]
    assert variables == [f"host-{i % 3}x" for i in range(6)] + [f"u{i}a" for i in range(4)]
    assert encode_rows(table, "UTC", TEMPLATE_FORMAT).column("numbers").to_pylist()[1] == [1, 7]


def pc_flatten(column: pa.ChunkedArray) -> list:
    return [value for row in column.to_pylist() for value in row]


@pytest.mark.parametrize("archive_format", [TEXT_FORMAT, TEMPLATE_FORMAT, GROUPED_FORMAT])
def test_archives_of_either_format_read_back(sqlite_client: tk.Client, archive_format: int) -> None:
    messages = [(STAMP, "2024-10-07T13:55:36.123Z GET /a 200"), (STAMP + 1, "x=1 \x11 \\ caf\u00e9")]
    archive = make_archive(sqlite_client, "web", messages, archive_format=archive_format)
    assert [(r["timestamp"], r["message"]) for r in archive_rows(sqlite_client, archive)] == messages


@pytest.mark.usefixtures("spark")
def test_an_ingested_corpus_reads_back_byte_for_byte(tmp_path: Path, sqlite_client: tk.Client) -> None:
    """The generated benchmark corpus (every timestamp form, gzip and plain, multi-line traces and
    lines without a timestamp), ingested in format 3, gives back exactly the messages of its files."""
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gen_logs.py"), str(tmp_path / "corpus"),
                    "--size", "600KB"], check=True, capture_output=True)
    logs = tmp_path / "corpus" / "logs"
    report = sqlite_client.archives.ingest("bench", [str(logs)], timezone="UTC")
    manifest = json.loads((tmp_path / "corpus" / "manifest.json").read_text())
    assert report.messages == manifest["messages"]
    rules = make_rules("UTC", None, sqlite_client.clock.now_ms())
    expected = []
    for file in list_inputs([str(logs)]):
        with open_log(file) as stream:
            for batch in messages_of_stream(stream, rules):
                expected += zip(batch.column("timestamp").to_pylist(), batch.column("message").to_pylist(),
                                [file.name] * batch.num_rows, strict=True)
    found = []
    for archive in report.archives:
        path = sqlite_client.workspace.storage.full_path(archive.path)
        assert format_of(pq.read_schema(path)) == GROUPED_FORMAT
        found += [(r["timestamp"], r["message"], r["source"]) for r in archive_rows(sqlite_client, archive)]
    assert sorted(found, key=repr) == sorted(expected, key=repr)
    # the timestamp texts were taken out of the stored text for (nearly) every timestamped message
    kept_in_text = sum(pq.read_table(sqlite_client.workspace.storage.full_path(a.path),
                              columns=["timestamp_format"]).column("timestamp_format").null_count
                for a in report.archives)
    assert kept_in_text <= report.messages_without_timestamp + report.messages // 100
