"""Meta records: validation (pure) and the record store on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.catalog.record_store import RecordStore
from tidekeep.catalog.records import (
    MAX_TIME_MS,
    MetaRecord,
    Status,
    record_from_mapping,
    record_from_row,
    records_from_mappings,
)
from tidekeep.errors import AlreadyExists, InvalidInput, NotFound
from tidekeep.store.schema_catalog import catalog_records

T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def base(**extra: object) -> dict[str, object]:
    return {"feed": "INTERNAL_LOGS", "type": "Raw Events", "create_time": T0, **extra}


# ---- pure validation ------------------------------------------------------------------------------


def test_defaults_fill_status_and_times() -> None:
    r = record_from_mapping(base())
    assert (r.id, r.status, r.effective_time, r.status_time) == (None, "UNLOCKED", T0, T0)
    assert r.attributes == {} and r.to_row()["attributes"] is None
    assert "id" not in r.to_row()


def test_iso_and_epoch_times_agree_and_naive_iso_is_utc() -> None:
    a = record_from_mapping(base(create_time="2024-01-01T00:00:00Z", effective_time="2024-01-01T01:00:00",
                                 status_time="2024-01-01T02:00:00.250+01:00"))
    assert a.create_time == T0
    assert a.effective_time == T0 + 3_600_000
    assert a.status_time == T0 + 3_600_000 + 250
    assert record_from_mapping(base(create_time=str(T0))).create_time == T0


def test_attributes_flat_and_nested_are_sorted_text() -> None:
    r = record_from_mapping(base(**{"attr.zeta": 5, "attr.alpha": "x"}, attributes={"mid": 1.5}))
    assert dict(r.attributes) == {"alpha": "x", "mid": "1.5", "zeta": "5"}
    assert r.to_row()["attributes"] == '{"alpha":"x","mid":"1.5","zeta":"5"}'


def test_status_any_case_and_explicit_ids() -> None:
    r = record_from_mapping(base(status="locked", id="17", parent_id=3, file_size=0, raw_size="12"))
    assert (r.status, r.id, r.parent_id, r.file_size, r.raw_size) == ("LOCKED", 17, 3, 0, 12)
    assert r.to_row()["id"] == 17


@pytest.mark.parametrize(("extra", "fragment"), [
    ({"feed": ""}, "field 'feed' is empty"),
    ({"feed": "x" * 256}, "field 'feed' is 256 characters long"),
    ({"type": None}, "field 'type' is required"),
    ({"create_time": "yesterday"}, "field 'create_time' is not a time"),
    ({"create_time": -1}, "field 'create_time' is out of range"),
    ({"create_time": MAX_TIME_MS + 1}, "field 'create_time' is out of range"),
    ({"effective_time": True}, "field 'effective_time' is not a time"),
    ({"file_size": -1}, "field 'file_size' must be at least 0"),
    ({"raw_size": "big"}, "field 'raw_size' is not an integer"),
    ({"id": 0}, "field 'id' must be at least 1"),
    ({"status": "GONE"}, "field 'status' is not one of UNLOCKED, LOCKED, DELETED"),
    ({"colour": "red"}, "unknown field 'colour'"),
    ({"attr.bad name": "x"}, "invalid attribute name 'bad name'"),
    ({"attr.ok": ["x"]}, "attribute 'ok' is not text"),
    ({"attributes": "[1]"}, "field 'attributes' is not an object"),
    ({"pipeline": 3}, "field 'pipeline' is not text"),
])
def test_bad_fields_name_the_record_and_field(extra: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        records_from_mappings([base(), base(**extra)])
    assert str(caught.value).startswith("record 2: ")
    assert fragment in str(caught.value)


def test_missing_create_time() -> None:
    with pytest.raises(InvalidInput, match="record 1: field 'create_time' is required"):
        records_from_mappings([{"feed": "F", "type": "T"}])


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20).filter(str.strip)
_times = st.integers(0, MAX_TIME_MS)


@given(feed=_text, type_=_text, create=_times, effective=st.none() | _times, status=st.sampled_from(list(Status)),
       ids=st.none() | st.integers(1, 2**62), size=st.none() | st.integers(0, 2**62),
       attrs=st.dictionaries(st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True), _text, max_size=4))
def test_row_round_trip(feed, type_, create, effective, status, ids, size, attrs) -> None:
    """Validate -> stored row -> record: nothing is lost, and the stored attribute JSON is canonical."""
    record = record_from_mapping({"feed": feed, "type": type_, "create_time": create, "effective_time": effective,
                                  "status": status.value.lower(), "id": ids, "file_size": size,
                                  "attributes": attrs})
    row = {"id": ids, **record.to_row()}
    back = record_from_row(SimpleNamespace(**row))
    assert back == record
    assert back.effective_time == (create if effective is None else effective)
    if attrs:
        assert row["attributes"] == json.dumps(attrs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)))
def test_iso_text_matches_epoch_ms(moment: datetime) -> None:
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    expected = (moment.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    assert record_from_mapping(base(create_time=moment.isoformat())).create_time == expected


# ---- the store, both backends -------------------------------------------------------------------


def rows(client: tk.Client) -> list[tuple]:
    with client.workspace.db.read() as conn:
        return [tuple(r) for r in conn.execute(sa.select(catalog_records).order_by(catalog_records.c.id))]


def test_add_get_list_count(client: tk.Client) -> None:
    ids = client.catalog.add([base(), base(feed="SPECIAL_DATA", status="LOCKED", **{"attr.owner": "ops"}),
                              MetaRecord(feed="APP_1_EVENTS", type="Events", create_time=T0 + 5, file_size=10)])
    assert len(ids) == 3 and ids == sorted(ids)
    got = client.catalog.get(ids[1])
    assert (got.id, got.feed, got.status, dict(got.attributes)) == (ids[1], "SPECIAL_DATA", "LOCKED", {"owner": "ops"})
    assert [r.id for r in client.catalog.records()] == ids
    assert [r.feed for r in client.catalog.records(type="Raw Events")] == ["INTERNAL_LOGS", "SPECIAL_DATA"]
    assert [r.id for r in client.catalog.records(status="locked")] == [ids[1]]
    assert [r.id for r in client.catalog.records(after_id=ids[0], limit=1)] == [ids[1]]
    assert client.catalog.count() == 3 and client.catalog.count("UNLOCKED") == 2
    with pytest.raises(NotFound, match=f"record {ids[2] + 100} does not exist"):
        client.catalog.get(ids[2] + 100)


def test_explicit_ids_then_assigned_ids_do_not_collide(client: tk.Client) -> None:
    assert client.catalog.add([base(id=1000), base(id=5)]) == [1000, 5]
    fresh = client.catalog.add([base(), base()])
    assert all(i > 1000 for i in fresh) and len(set(fresh)) == 2
    mixed = client.catalog.add([base(), base(id=2000), base()])
    assert mixed[1] == 2000 and len(set(mixed)) == 3
    assert client.catalog.add([base()])[0] > 2000


def test_duplicate_id_writes_nothing(client: tk.Client) -> None:
    client.catalog.add([base(id=7)])
    before = rows(client)
    with pytest.raises(AlreadyExists, match="record id 7 already exists"):
        client.catalog.add([base(id=8), base(id=7)])
    with pytest.raises(AlreadyExists, match="record id 9 appears twice"):
        client.catalog.add([base(id=9), base(id=9)])
    assert rows(client) == before


def test_bad_record_writes_nothing(client: tk.Client) -> None:
    client.catalog.add([base()])
    before = rows(client)
    with pytest.raises(InvalidInput, match="record 3: field 'file_size' must be at least 0"):
        client.catalog.add([base(), base(), base(file_size=-5)])
    with pytest.raises(InvalidInput, match="expected a list of records"):
        client.catalog.add(base())
    assert rows(client) == before


def test_set_status_updates_status_time(tmp_path, metadata_url: str) -> None:
    clock = tk.ManualClock(T0 + 86_400_000)
    with tk.connect(home=tmp_path / "ws2", metadata_url=metadata_url, storage=str(tmp_path / "d2"),
                    clock=clock, create=True) as c:
        store = RecordStore(c.workspace)
        ids = store.add([base(), base(), base()])
        assert store.set_status(ids[:2], "locked") == 2
        assert [(r.status, r.status_time) for r in store.list()] == [
            ("LOCKED", T0 + 86_400_000), ("LOCKED", T0 + 86_400_000), ("UNLOCKED", T0)]
        before = rows(c)
        with pytest.raises(NotFound, match=f"record {ids[2] + 1} does not exist"):
            store.set_status([ids[2], ids[2] + 1], "DELETED")
        with pytest.raises(InvalidInput, match="invalid status 'GONE'"):
            store.set_status(ids, "GONE")
        assert rows(c) == before


def test_list_rejects_bad_arguments(client: tk.Client) -> None:
    with pytest.raises(InvalidInput, match="invalid limit 0"):
        client.catalog.records(limit=0)
    with pytest.raises(InvalidInput, match="invalid status 'x'"):
        client.catalog.count("x")
    with pytest.raises(InvalidInput, match="invalid record id -1"):
        client.catalog.get(-1)
