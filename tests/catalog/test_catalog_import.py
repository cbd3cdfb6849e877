"""Bulk import through Spark (the session `spark` fixture): CSV, JSON lines and Parquet, on SQLite
and PostgreSQL; a bad row anywhere fails the import before anything is written."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.catalog.importer import parse_csv_line
from tidekeep.errors import InvalidInput, NotFound
from tidekeep.store.schema_catalog import catalog_records

T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


@pytest.fixture
def imp(spark, client: tk.Client) -> tk.Client:
    """A client whose client.spark() is the session fixture (getOrCreate returns the active one)."""
    assert client.spark() is spark
    return client


def table_rows(client: tk.Client) -> list[dict]:
    with client.workspace.db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(catalog_records).order_by(catalog_records.c.id))]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


CSV = """id,feed,type,create_time,effective_time,status,parent_id,pipeline,file_size,raw_size,location,attr.owner
100,INTERNAL_LOGS,Raw Events,2024-01-01T00:00:00Z,,,,,10,40,catalog/a.dat,ops
,SPECIAL_DATA,"Events, processed",1704067200000,2023-12-31T23:00:00,locked,100,p1,5,,,
,APP_1_EVENTS,Error,2024-01-02,,DELETED,,,,,,"x,y"
"""


def test_csv_import_both_backends(imp: tk.Client, tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    report = imp.catalog.import_path(write(tmp_path / "a.csv", CSV), progress=lambda d, t: calls.append((d, t)))
    assert (report.rows, report.files, report.inserted, report.skipped) == (3, 1, 3, 0)
    assert calls[0] == (0, 3) and calls[-1] == (3, 3)
    rows = table_rows(imp)
    assert rows[0]["id"] == 100 and all(r["id"] > 100 for r in rows[1:])  # auto ids past explicit
    by_feed = {r["feed"]: r for r in rows}
    assert by_feed["INTERNAL_LOGS"] | {"id": 0} == {
        "id": 0, "feed": "INTERNAL_LOGS", "type": "Raw Events", "create_time": T0, "effective_time": T0,
        "status": "UNLOCKED", "status_time": T0, "parent_id": None, "pipeline": None, "file_size": 10,
        "raw_size": 40, "location": "catalog/a.dat", "attributes": '{"owner":"ops"}'}
    special = by_feed["SPECIAL_DATA"]
    assert (special["type"], special["status"], special["parent_id"], special["effective_time"]) == (
        "Events, processed", "LOCKED", 100, T0 - 3_600_000)
    assert special["attributes"] is None and special["raw_size"] is None
    assert by_feed["APP_1_EVENTS"]["attributes"] == '{"owner":"x,y"}'
    assert by_feed["APP_1_EVENTS"]["create_time"] == T0 + 86_400_000
    # a later add gets a fresh id
    assert imp.catalog.add([{"feed": "F", "type": "T", "create_time": 1}])[0] > max(r["id"] for r in rows)


def test_reimport_with_ids_is_idempotent(imp: tk.Client, tmp_path: Path) -> None:
    lines = [json.dumps({"id": i, "feed": "F", "type": "T", "create_time": T0 + i}) for i in range(1, 8)]
    path = write(tmp_path / "a.jsonl", "\n".join(lines) + "\n")
    first = imp.catalog.import_path(path)
    before = table_rows(imp)
    again = imp.catalog.import_path(path)
    assert (first.inserted, first.skipped, again.inserted, again.skipped) == (7, 0, 0, 7)
    assert table_rows(imp) == before and len(before) == 7


def test_json_lines_nested_attributes_and_blank_lines(imp: tk.Client, tmp_path: Path) -> None:
    text = "\n".join([
        json.dumps({"feed": "A", "type": "Events", "create_time": "2024-01-01T00:00:00+00:00",
                    "attributes": {"b": 2, "a": "x"}, "attr.c": "y"}),
        "",
        json.dumps({"feed": "B", "type": "Raw Events", "create_time": T0, "status_time": T0 + 5, "status": "DELETED"}),
    ]) + "\n"
    report = imp.catalog.import_path(write(tmp_path / "x.ndjson", text))
    assert report.rows == 2
    rows = sorted(table_rows(imp), key=lambda r: r["feed"])  # tasks run side by side: ids need not follow lines
    assert [(r["feed"], r["attributes"], r["status"], r["status_time"]) for r in rows] == [
        ("A", '{"a":"x","b":"2","c":"y"}', "UNLOCKED", T0), ("B", None, "DELETED", T0 + 5)]


def test_parquet_directory_with_row_groups(imp: tk.Client, tmp_path: Path) -> None:
    folder = tmp_path / "pq"
    folder.mkdir()
    for part in range(2):
        n = 25
        table = pa.table({
            "id": pa.array([part * 1000 + i + 1 for i in range(n)], pa.int64()),
            "feed": [f"FEED_{part}"] * n,
            "type": ["Raw Events"] * n,
            "create_time": pa.array([datetime(2024, 1, 1, tzinfo=UTC)] * n, pa.timestamp("ms", tz="UTC")),
            "file_size": pa.array(list(range(n)), pa.int64()),
            "attr.region": ["eu" if i % 2 else None for i in range(n)],
        })
        pq.write_table(table, folder / f"part-{part}.parquet", row_group_size=10)
    (folder / "_SUCCESS").write_text("")
    report = imp.catalog.import_path(folder)
    assert (report.rows, report.files, report.inserted) == (50, 2, 50)
    rows = table_rows(imp)
    assert [r["id"] for r in rows] == [*range(1, 26), *range(1001, 1026)]
    assert {r["create_time"] for r in rows} == {T0}
    assert sum(r["attributes"] == '{"region":"eu"}' for r in rows) == 24


def test_many_rows_several_partitions_and_batches(imp: tk.Client, tmp_path: Path) -> None:
    lines = ["feed,type,create_time,file_size"] + [f"F{i % 7},T,{T0 + i},{i}" for i in range(12_000)]
    report = imp.catalog.import_path(write(tmp_path / "big.csv", "\n".join(lines) + "\n"))
    assert report.rows == report.inserted == 12_000
    with imp.workspace.db.read() as conn:
        count, total, distinct = conn.execute(sa.select(
            sa.func.count(), sa.func.sum(catalog_records.c.file_size),
            sa.func.count(sa.distinct(catalog_records.c.create_time)))).one()
    assert (count, total, distinct) == (12_000, sum(range(12_000)), 12_000)


@pytest.mark.parametrize(("name", "text", "fragment"), [
    ("bad.csv", "feed,type,create_time\nA,T,1\nB,T,1\nC,T,tomorrow\nD,T,1\n",
     "bad.csv line 4: field 'create_time' is not a time"),
    ("bad.csv", "feed,type,create_time\nA,T,1\nB,T\n", "bad.csv line 3: expected 3 fields as in the header, got 2"),
    ("bad.csv", "feed,type,colour\n", "bad.csv line 1: unknown column 'colour'"),
    ("bad.csv", "feed,type,create_time\nA,,1\n", "bad.csv line 2: field 'type' is required"),
    ("bad.csv", "feed,type,create_time,file_size\nA,T,1,-3\nA,T,1,-4\n",
     "bad.csv line 2: field 'file_size' must be at least 0: got -3 (1 more bad rows)"),
    ("bad.jsonl", '{"feed":"A","type":"T","create_time":1}\n{"feed": "A",\n', "bad.jsonl line 2: bad JSON"),
    ("bad.jsonl", '{"feed":"A","type":"T","create_time":1,"size":3}\n', "bad.jsonl line 1: unknown column 'size'"),
    ("bad.jsonl", '[1,2]\n', "bad.jsonl line 1: expected a JSON object, got list"),
    ("bad.jsonl", '{"id":5,"feed":"A","type":"T","create_time":1}\n{"feed":"B","type":"T","create_time":2}\n'
                  '{"id":5,"feed":"C","type":"T","create_time":3}\n', "bad.jsonl line 1: id 5 appears 2 times"),
])
def test_bad_row_fails_before_writing(imp: tk.Client, tmp_path: Path, name: str, text: str, fragment: str) -> None:
    imp.catalog.add([{"feed": "EXISTING", "type": "T", "create_time": 1}])
    before = table_rows(imp)
    with pytest.raises(InvalidInput) as caught:
        imp.catalog.import_path(write(tmp_path / name, text))
    assert fragment in str(caught.value)
    assert str(tmp_path / name) in str(caught.value)
    assert table_rows(imp) == before


def test_bad_parquet_row_names_the_row(imp: tk.Client, tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"feed": ["A", "B", "C"], "type": ["T", "T", "T"],
                             "create_time": pa.array([1, -5, 3], pa.int64())}), path, row_group_size=2)
    with pytest.raises(InvalidInput, match=r"p\.parquet row 2: field 'create_time' is out of range"):
        imp.catalog.import_path(path)
    assert table_rows(imp) == []


def test_paths_and_formats(sqlite_client: tk.Client, spark, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        sqlite_client.catalog.import_path(tmp_path / "missing.csv")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    write(mixed / "a.csv", "feed,type,create_time\nA,T,1\n")
    write(mixed / "b.jsonl", '{"feed":"B","type":"T","create_time":2}\n')
    with pytest.raises(InvalidInput, match="mixes formats"):
        sqlite_client.catalog.import_path(mixed)
    with pytest.raises(InvalidInput, match="cannot tell the format"):
        sqlite_client.catalog.import_path(write(tmp_path / "data.txt", "feed,type,create_time\nA,T,1\n"))
    with pytest.raises(InvalidInput, match="unknown import format 'xml'"):
        sqlite_client.catalog.import_path(tmp_path / "data.txt", format="xml")
    report = sqlite_client.catalog.import_path(tmp_path / "data.txt", format="csv")
    assert report.rows == 1 and sqlite_client.catalog.records()[0].feed == "A"
    report = sqlite_client.catalog.import_path(mixed, format="json")
    assert (report.rows, report.files) == (1, 1)


def test_csv_line_parser() -> None:
    header = ["feed", "type", "create_time"]
    assert parse_csv_line('"a,b","",3', header, "w") == {"feed": "a,b", "create_time": "3"}
    assert parse_csv_line("   ", header, "w") is None
    with pytest.raises(InvalidInput, match="w: bad CSV"):
        parse_csv_line('"unterminated,x,3', header, "w")


_field = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\r\n\x00"), max_size=12)


@given(st.lists(_field, min_size=3, max_size=3))
def test_csv_line_round_trip(values: list[str]) -> None:
    """What Python's csv writer writes on one line, the importer's line parser reads back (empty = not given)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(values)
    header = ["feed", "type", "pipeline"]
    parsed = parse_csv_line(buffer.getvalue(), header, "w")
    expected = {name: value for name, value in zip(header, values, strict=True) if value != ""}
    assert parsed == (expected if buffer.getvalue().strip() else None)


def test_first_bad_row_in_file_order(sqlite_client: tk.Client, spark, tmp_path: Path) -> None:
    folder = tmp_path / "two"
    folder.mkdir()
    good = [f"F,T,{i}" for i in range(20)]
    write(folder / "a.csv", "\n".join(["feed,type,create_time", *good[:7], "F,T,never", *good]) + "\n")
    write(folder / "b.csv", "\n".join(["feed,type,create_time", "F,T,nope", *good]) + "\n")
    with pytest.raises(InvalidInput) as caught:
        sqlite_client.catalog.import_path(folder)
    assert str(caught.value).startswith(f"{folder / 'a.csv'} line 9: field 'create_time' is not a time")
    assert str(caught.value).endswith("(1 more bad rows)")
    assert sqlite_client.catalog.count() == 0


def test_a_relative_sqlite_url_reaches_the_executors_as_the_drivers_file(spark, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """metadata.url `sqlite:///meta.db` given relative, in a process that changed directory after
    Spark started: the driver opens meta.db in its working directory; executors run in the directory
    Spark started in and must write into the same file, not into a meta.db of their own there."""
    import uuid

    spark_directory = Path.cwd()  # where the session's Python workers run (the test session's start)
    name = f"meta-{uuid.uuid4().hex[:12]}.db"
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    client = tk.connect(tmp_path / "ws", metadata_url=f"sqlite:///{name}", storage=str(tmp_path / "data"), create=True)
    try:
        assert client.settings.metadata_url == f"sqlite:///{work / name}"
        report = client.catalog.import_path(write(tmp_path / "a.csv", CSV))
        assert (report.inserted, len(table_rows(client))) == (3, 3)
        assert list(spark_directory.glob(f"{name}*")) == []
    finally:
        client.close()
        for stray in spark_directory.glob(f"{name}*"):  # what executors wrote into before the fix
            stray.unlink()
