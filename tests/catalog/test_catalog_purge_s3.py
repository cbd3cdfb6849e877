"""The catalog purge where records keep their data on S3 (a moto server on loopback, through
pyarrow's own S3 client): a `catalog.data_roots` entry carries the bucket's pyarrow options
(endpoint, scheme, region) and never credentials; the purge deletes exactly the objects of purged
records under the declared roots (and, with the storage root on S3 too, relative locations there),
and refuses every object outside them (docs/catalog-purge.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.s3 import S3Server
from tidekeep.store.fileio import FileIO
from tidekeep.store.schema_catalog import catalog_records

DAY = 86_400_000
NOW = 1_750_000_000_000


def insert_deleted(client: tk.Client, locations: list[str]) -> dict[str, int]:
    """DELETED records old enough to purge, inserted straight into the table (as rows written before
    the rules or by hand would be): the purge checks each location itself."""
    ids = {}
    with client.workspace.db.write() as conn:
        for i, location in enumerate(locations):
            ids[location] = int(conn.execute(sa.insert(catalog_records).values(
                feed="FEED", type="Raw Events", create_time=NOW - 400 * DAY, status="DELETED",
                status_time=NOW - 30 * DAY - i, file_size=7, location=location)).inserted_primary_key[0])
    return ids


def remaining_ids(client: tk.Client) -> set[int]:
    with client.workspace.db.read() as conn:
        return {r.id for r in conn.execute(sa.select(catalog_records.c.id))}


def test_the_purge_deletes_exactly_the_objects_of_purged_records_under_the_data_roots(
        tmp_path: Path, metadata_url: str, storage_uri: str, s3_server: S3Server, s3_bucket: str) -> None:
    root = s3_server.uri(s3_bucket, "feeds")  # with endpoint_override, scheme and region: no credentials
    bucket = FileIO.outside(s3_server.uri(s3_bucket))
    keys = ["feeds/x/a.dat", "feeds/y/b.dat", "feedsX/c.dat", "other/d.dat", "feeds/kept.dat"]
    for key in keys:
        bucket.write(key, key.encode())
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage_uri,
                        clock=tk.ManualClock(NOW), settings={"catalog.data_roots": root}, create=True)
    try:
        client.workspace.storage.write("catalog/e.dat", b"in the storage root")
        inside = [f"s3://{s3_bucket}/feeds/x/a.dat", f"s3://{s3_bucket}/feeds/y/b.dat", "catalog/e.dat"]
        ids = client.catalog.add([{"feed": "F", "type": "Raw", "create_time": NOW, "location": loc}
                                  for loc in inside])
        with pytest.raises(tk.InvalidInput, match=r"is not under any catalog\.data_roots entry"):
            client.catalog.add([{"feed": "F", "type": "Raw", "create_time": NOW,
                                 "location": f"s3://{s3_bucket}/feedsX/c.dat"}])
        with client.workspace.db.write() as conn:
            conn.execute(sa.update(catalog_records).where(catalog_records.c.id.in_(ids))
                         .values(status="DELETED", status_time=NOW - 30 * DAY))
        outside = insert_deleted(client, [f"s3://{s3_bucket}/feedsX/c.dat", f"s3://{s3_bucket}/other/d.dat",
                                          f"s3://{s3_bucket}/feeds", f"s3://{s3_bucket}/feeds/x/../../other/d.dat"])

        report = client.catalog.purge()
        assert report.purged == 3 and report.failures == 4
        # (the storage root, on S3, is this bucket's data/ prefix)
        assert {f.path for f in bucket.list_files("") if not f.path.startswith("data/")} == {
            "feedsX/c.dat", "other/d.dat", "feeds/kept.dat"}
        assert not client.workspace.storage.exists("catalog/e.dat")
        assert remaining_ids(client) == set(outside.values())
        reasons = {f["id"]: f["error"] for f in report.failed}
        assert "is not under any catalog.data_roots entry" in reasons[outside[f"s3://{s3_bucket}/feedsX/c.dat"]]
        assert "names a catalog.data_roots entry itself" in reasons[outside[f"s3://{s3_bucket}/feeds"]]
    finally:
        client.close()


@pytest.mark.parametrize(("entry", "part"), [
    ("s3://AKIDEXAMPLE:wJalrXUtnFEMIK7MDENG@bucket/feeds", "a password in its user part"),
    ("s3://AKIDEXAMPLE@bucket/feeds", "an access key in its user part"),
    ("s3://bucket/feeds?region=eu-west-1&secret_key=wJalrXUtnFEMIK7MDENG", "the query parameter 'secret_key'"),
    ("gs://bucket/feeds?access_token=ya29wJalrXUtnFEMIK7MDENG", "the query parameter 'access_token'"),
])
def test_a_data_root_carrying_credentials_is_refused_without_showing_them(tmp_path: Path, entry: str,
                                                                          part: str) -> None:
    with pytest.raises(tk.ConfigError) as caught:
        tk.connect(home=tmp_path / "ws", metadata_url=f"sqlite:///{tmp_path / 'm.db'}", storage=str(tmp_path / "data"),
                   settings={"catalog.data_roots": f"/srv/feeds,{entry}"}, create=True)
    message = str(caught.value)
    assert message.startswith("bad value for 'catalog.data_roots' in ") and f"carries credentials ({part})" in message
    assert "\n" not in message and "wJalrXUtnFEMIK7MDENG" not in message and "AKIDEXAMPLE" not in message
    assert not (tmp_path / "ws").exists() and not (tmp_path / "m.db").exists()
