"""The record generator: deterministic, valid, realistic, written on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.catalog.generate import BLOCK, DEFAULT_FEEDS, GenerateSpec, generate_block, generate_tables
from tidekeep.catalog.records import record_from_mapping
from tidekeep.errors import InvalidInput
from tidekeep.store.schema_catalog import catalog_records

NOW = 1_735_689_600_000  # 2025-01-01T00:00:00Z
DAY = 86_400_000


def all_rows(client: tk.Client) -> list[dict]:
    with client.workspace.db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(catalog_records).order_by(catalog_records.c.id))]


def check_rows(rows: list[dict], start_ms: int, span_days: int) -> None:
    ids = {r["id"] for r in rows}
    for r in rows:
        record = record_from_mapping(r, f"row {r['id']}")  # every generated row passes the record gate
        assert start_ms - span_days * DAY <= record.create_time < start_ms
        assert record.effective_time <= record.create_time
        assert record.create_time <= record.status_time <= start_ms
        assert record.raw_size >= 2 * record.file_size > 0
        assert r["location"] == f"catalog/{r['feed']}/{r['id']}.dat"
        if r["parent_id"] is not None:
            assert r["parent_id"] in ids and r["parent_id"] < r["id"]
            assert r["type"] in ("Events", "Error") and r["pipeline"]
        else:
            assert r["pipeline"] is None


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), rows=st.integers(1, 3 * BLOCK), span=st.integers(1, 4000),
       start=st.integers(DAY, NOW), first_id=st.integers(1, 10**12))
def test_blocks_are_valid_and_pure(seed: int, rows: int, span: int, start: int, first_id: int) -> None:
    spec = GenerateSpec(seed, rows, start, span, DEFAULT_FEEDS, ("Raw Events", "Events", "Reference", "Error"),
                        first_id)
    blocks = (rows + BLOCK - 1) // BLOCK
    last = generate_block(spec, blocks - 1)
    assert last.to_pylist() == generate_block(spec, blocks - 1).to_pylist()  # a function of (spec, block)
    assert last.column("id").to_pylist()[-1] == first_id + rows - 1
    sample = last.slice(0, 300).to_pylist()
    for r in sample:
        record_from_mapping(r)
        assert max(0, start - span * DAY) <= r["create_time"] < start
        if r["parent_id"] is not None:
            assert first_id <= r["parent_id"] < r["id"]


def test_batch_size_does_not_change_the_data() -> None:
    spec = GenerateSpec(7, 2 * BLOCK + 123, NOW, 30, DEFAULT_FEEDS, ("Raw Events", "Events"), 1)
    one = [r for t in generate_tables(spec, 10**6) for r in t.to_pylist()]
    many = [r for t in generate_tables(spec, 1) for r in t.to_pylist()]
    assert one == many and len(one) == 2 * BLOCK + 123
    assert [r["id"] for r in one] == list(range(1, 2 * BLOCK + 124))


def test_generate_deterministic_valid_and_realistic(client: tk.Client, tmp_path: Path, metadata_url: str) -> None:
    calls: list[tuple[int, int]] = []
    report = client.catalog.generate(25_000, seed=3, progress=lambda d, t: calls.append((d, t)),
                                     start_ms=NOW, span_days=365, batch_size=BLOCK)
    assert (report.rows, report.first_id, report.last_id) == (25_000, 1, 25_000)
    assert calls == [(0, 25_000), (10_000, 25_000), (20_000, 25_000), (25_000, 25_000)]
    rows = all_rows(client)
    assert len(rows) == 25_000
    check_rows(rows, NOW, 365)
    feeds = {r["feed"] for r in rows}
    assert feeds == set(DEFAULT_FEEDS)
    assert {r["type"] for r in rows} == {"Raw Events", "Events", "Reference", "Error"}
    locked = sum(r["status"] == "LOCKED" for r in rows)
    assert 100 < locked < 500  # about 1 %
    assert 1500 < sum(r["attributes"] is not None for r in rows) < 3500  # about 10 %
    assert sum(r["parent_id"] is not None for r in rows) > 5000

    # the same seed in a fresh store gives the same rows; another seed does not
    home = tmp_path / "again"
    other_url = f"sqlite:///{tmp_path / 'again.db'}"
    with tk.connect(home=home, metadata_url=other_url, storage=str(tmp_path / "d-again"), create=True) as again:
        again.catalog.generate(25_000, seed=3, start_ms=NOW, span_days=365)
        assert all_rows(again) == rows
    with tk.connect(home=home, metadata_url=f"sqlite:///{tmp_path / 'other.db'}",
                    storage=str(tmp_path / "d-other"), create=True) as other:
        other.catalog.generate(25_000, seed=4, start_ms=NOW, span_days=365)
        assert all_rows(other) != rows


def test_generate_after_existing_records_and_then_add(client: tk.Client) -> None:
    client.catalog.add([{"id": 500, "feed": "F", "type": "T", "create_time": 1}])
    report = client.catalog.generate(1_000, seed=1, start_ms=NOW)
    assert (report.first_id, report.last_id) == (501, 1500)
    assert client.catalog.add([{"feed": "F", "type": "T", "create_time": 2}]) == [1501]
    assert client.catalog.count() == 1002


def test_generate_with_files(sqlite_client: tk.Client) -> None:
    sqlite_client.catalog.generate(50, seed=2, start_ms=NOW, with_files=True)
    for record in sqlite_client.catalog.records():
        path = Path(sqlite_client.workspace.storage.full_path(record.location))
        assert path.read_text() == f"generated record {record.id}\n"


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"rows": -1}, "invalid rows -1"),
    ({"rows": 10, "seed": -2}, "invalid seed -2"),
    ({"rows": 10, "span_days": 0}, "invalid span_days 0"),
    ({"rows": 10, "batch_size": 0}, "invalid batch_size 0"),
    ({"rows": 10, "feeds": []}, "feeds must be a non-empty list"),
    ({"rows": 10, "types": ["ok", ""]}, "invalid type ''"),
])
def test_bad_arguments_change_nothing(client: tk.Client, kwargs: dict, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment):
        client.catalog.generate(**kwargs)
    assert client.catalog.count() == 0
