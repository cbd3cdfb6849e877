"""`catalog import` checks every row's location with the purge's rules (docs/catalog-purge.md): a
location into tidekeep's own areas, or an absolute one outside `catalog.data_roots`, fails the
whole import naming the file and line, before anything is written. CSV, JSON lines and Parquet, on
SQLite and PostgreSQL, through the session Spark."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

import tidekeep as tk
from tidekeep.store.schema_catalog import catalog_records


@pytest.fixture
def rooted(spark, tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    """A client with one data root, tmp_path/feeds; client.spark() is the session fixture."""
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   settings={"catalog.data_roots": [str(tmp_path / "feeds")]}, create=True)
    assert c.spark() is spark
    yield c
    c.close()


def locations(client: tk.Client) -> list[str | None]:
    with client.workspace.db.read() as conn:
        return [r.location for r in conn.execute(sa.select(catalog_records).order_by(catalog_records.c.id))]


def test_csv_and_json_rows_under_a_data_root_or_the_storage_root_are_imported(rooted: tk.Client,
                                                                                tmp_path: Path) -> None:
    feeds = tmp_path / "feeds"
    csv = tmp_path / "ok.csv"
    csv.write_text("id,feed,type,create_time,location\n"
                   f"1,F,Raw,1,{feeds}/a.dat\n2,F,Raw,2,catalog/b.dat\n3,F,Raw,3,file://{feeds}/c/d.dat\n4,F,Raw,4,\n")
    assert rooted.catalog.import_path(csv).inserted == 4
    json_lines = tmp_path / "ok.jsonl"
    json_lines.write_text(f'{{"id": 5, "feed": "F", "type": "Raw", "create_time": 5, "location": "{feeds}/e"}}\n')
    assert rooted.catalog.import_path(json_lines).inserted == 1
    assert locations(rooted) == [f"{feeds}/a.dat", "catalog/b.dat", f"file://{feeds}/c/d.dat", None, f"{feeds}/e"]


@pytest.mark.parametrize("kind", ["csv", "json", "parquet"])
def test_a_refused_location_fails_the_whole_import_naming_its_line(rooted: tk.Client, tmp_path: Path,
                                                                    kind: str) -> None:
    rooted.catalog.add([{"feed": "EXISTING", "type": "T", "create_time": 1}])
    storage = rooted.workspace.storage.root
    rows = [("A", f"{tmp_path}/feeds/ok.dat"), ("B", "catalog/ok.dat"), ("C", f"{tmp_path}/feedsX/a.dat"),
            ("D", "streams/s/x-1/0.parquet"), ("E", "catalog/../../escape")]
    if kind == "csv":
        path = tmp_path / "in.csv"
        path.write_text("feed,type,create_time,location\n" + "".join(f"{f},Raw,1,{loc}\n" for f, loc in rows))
        where = f"{path} line 4"  # the header is line 1
    elif kind == "json":
        path = tmp_path / "in.jsonl"
        path.write_text("".join(f'{{"feed": "{f}", "type": "Raw", "create_time": 1, "location": "{loc}"}}\n'
                                for f, loc in rows))
        where = f"{path} line 3"
    else:
        path = tmp_path / "in.parquet"
        pq.write_table(pa.table({"feed": [f for f, _ in rows], "type": ["Raw"] * len(rows),
                                 "create_time": [1] * len(rows), "location": [loc for _, loc in rows]}),
                       path, row_group_size=2)
        where = f"{path} row 3"
    with pytest.raises(tk.InvalidInput) as caught:
        rooted.catalog.import_path(path)
    assert str(caught.value) == (f"{where}: location {rows[2][1]!r} is not under any catalog.data_roots entry "
                                 "(2 more bad rows)")
    assert locations(rooted) == [None]  # only the record added before: nothing imported

    # the first bad row is the one named; the stream-data row alone
    only = tmp_path / f"stream.{'jsonl' if kind == 'json' else kind}"
    if kind == "csv":
        only.write_text("feed,type,create_time,location\nD,Raw,1,streams/s/x-1/0.parquet\n")
    elif kind == "json":
        only.write_text('{"feed": "D", "type": "Raw", "create_time": 1, "location": "streams/s/x-1/0.parquet"}\n')
    else:
        pq.write_table(pa.table({"feed": ["D"], "type": ["Raw"], "create_time": [1],
                                 "location": ["streams/s/x-1/0.parquet"]}), only)
    with pytest.raises(tk.InvalidInput) as caught:
        rooted.catalog.import_path(only)
    assert str(caught.value).endswith(
        f" 2: location 'streams/s/x-1/0.parquet' lies inside tidekeep's stream data ({storage}/streams)"
        if kind == "csv" else
        f" 1: location 'streams/s/x-1/0.parquet' lies inside tidekeep's stream data ({storage}/streams)")
    assert locations(rooted) == [None]
