"""The catalog purge deletes only catalog data (docs/catalog-purge.md, "Where a record's data may
live"): a location may never reach tidekeep's own areas (stream chunks and transaction staging,
archives, search results, the metadata file, tidekeep.yaml); absolute locations only under
`catalog.data_roots`. Refused at add time, and again by the purge for rows that got in another way.
On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tidekeep as tk
from tidekeep.store.schema import audit as audit_table
from tidekeep.store.schema_catalog import catalog_records

DAY = 86_400_000
NOW = 1_750_000_000_000
STREAM = "ops/events"


@pytest.fixture
def client(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(NOW), settings={"writer.linger": 0}, create=True)
    yield c
    c.close()


def write_stream(client: tk.Client, count: int = 50) -> list[str]:
    """A real stream written by a real writer; returns its chunk files (relative to the storage root)."""
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with client.stream(STREAM).writer("w1") as writer:
        for i in range(count):
            writer.write(f"ev{i}".encode(), routing_key=f"k{i % 5}")
    files = sorted(f.path for f in client.workspace.storage.list_files("streams"))
    assert files and all(f.startswith("streams/") for f in files)
    return files


def payloads(client: tk.Client) -> list[bytes]:
    return sorted(e.payload for e in client.stream(STREAM).read())


def insert_deleted(client: tk.Client, locations: list[str]) -> list[int]:
    """DELETED records old enough to purge, inserted straight into the table (as an edit by hand, or
    a row written before the rules existed, would be): the purge must check them itself."""
    ids = []
    with client.workspace.db.write() as conn:
        for i, location in enumerate(locations):
            ids.append(int(conn.execute(sa.insert(catalog_records).values(
                feed="FEED", type="Raw Events", create_time=NOW - 400 * DAY, status="DELETED",
                status_time=NOW - 30 * DAY - i, file_size=7, location=location)).inserted_primary_key[0]))
    return ids


def remaining_ids(client: tk.Client) -> set[int]:
    with client.workspace.db.read() as conn:
        return {r.id for r in conn.execute(sa.select(catalog_records.c.id))}


def purge_audit(client: tk.Client) -> list[dict[str, Any]]:
    with client.workspace.db.read() as conn:
        rows = conn.execute(sa.select(audit_table).where(audit_table.c.action == "catalog_purge")
                            .order_by(audit_table.c.id))
        return [dict(r._mapping) for r in rows]


def test_purge_of_a_record_pointing_into_stream_data_is_refused(client: tk.Client, metadata_url: str) -> None:
    chunks = write_stream(client)
    before = payloads(client)
    assert len(before) == 50
    root = client.workspace.storage.root
    chunk = chunks[0]
    stream_dir = chunk.split("/txn/")[0].rsplit("/", 1)[0]
    pointing_in = [
        chunk,                                             # relative, as the chunk table holds it
        f"catalog/../{chunks[1]}",                          # relative, climbing back in
        f"{root}/{chunks[-1]}",                             # absolute
        f"file://{root}/%73treams/{chunks[-1][len('streams/'):]}",  # a file URI, percent-escaped
        f"{root}//streams/./{chunks[0][len('streams/'):]}/",  # repeated and trailing slashes
        f"{stream_dir}/txn/abc/0.parquet",                  # transaction staging
    ]
    if metadata_url.startswith("sqlite"):
        pointing_in.append(metadata_url.removeprefix("sqlite:///"))  # the metadata database itself
    ids = insert_deleted(client, pointing_in)

    report = client.catalog.purge()

    assert (report.purged, report.failures) == (0, len(pointing_in))
    assert remaining_ids(client) == set(ids)  # every row kept
    assert sorted(f["id"] for f in report.failed) == sorted(ids)
    errors = {f["location"]: f["error"] for f in report.failed}
    assert errors[chunk] == (f"location {chunk!r} lies inside tidekeep's stream data ({root}/streams)")
    assert sorted(f.path for f in client.workspace.storage.list_files("streams")) == chunks  # no chunk removed
    assert payloads(client) == before  # and the stream reads in full
    if metadata_url.startswith("sqlite"):
        assert Path(metadata_url.removeprefix("sqlite:///")).stat().st_size > 0
    assert purge_audit(client) == []


def test_adding_a_record_pointing_into_stream_data_is_refused(client: tk.Client) -> None:
    chunks = write_stream(client)
    with pytest.raises(tk.InvalidInput) as caught:
        client.catalog.add([{"feed": "F", "type": "Raw", "create_time": NOW, "location": "catalog/x.dat"},
                            {"feed": "F", "type": "Raw", "create_time": NOW, "location": chunks[0]}])
    assert str(caught.value) == (f"record 2: location {chunks[0]!r} lies inside tidekeep's stream data "
                                 f"({client.workspace.storage.root}/streams)")
    assert remaining_ids(client) == set()  # nothing added, not even the good first record


def test_purge_audit_names_the_files_and_bytes_it_removed(client: tk.Client) -> None:
    ids = insert_deleted(client, ["catalog/a.dat", "catalog/b.dat", "catalog/never-written.dat"])
    for name, size in (("a", 3), ("b", 5)):
        path = Path(client.workspace.storage.full_path(f"catalog/{name}.dat"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    report = client.catalog.purge()
    assert report.purged == 3
    [entry] = purge_audit(client)
    details = json.loads(entry["details"])
    root = client.workspace.storage.root
    assert details["files"] == [{"id": ids[0], "path": f"{root}/catalog/a.dat", "bytes": 3},
                                {"id": ids[1], "path": f"{root}/catalog/b.dat", "bytes": 5}]
    assert (details["files_removed"], details["files_omitted"], entry["bytes_freed"]) == (2, 0, 8)


def test_every_area_of_tidekeep_is_refused_at_add_and_by_the_purge(tmp_path: Path, metadata_url: str) -> None:
    home, data = tmp_path / "ws", tmp_path / "data"
    settings, _ = tk.init_workspace(home, {"metadata.url": metadata_url, "storage.uri": str(data)})
    # a data root above it all, which loading settings refuses (settings built by hand skip that
    # check): tidekeep's areas still win
    values = dict(settings.values, **{"catalog.data_roots": (str(tmp_path),)})
    client = tk.Client(tk.config.Settings(home, values), tk.ManualClock(NOW))
    settings_text = (home / "tidekeep.yaml").read_text()
    try:
        files = {"archives/ds/a.parquet": "log archives", "search-results/3/a.parquet": "search results",
                 "streams/s/x-1/0.parquet": "stream data", "ARCHIVES/ds/b.parquet": "log archives",
                 "tidekeep-workspace.json": "workspace id file"}
        for rel in files:
            (data / rel).parent.mkdir(parents=True, exist_ok=True)
            if rel != "tidekeep-workspace.json":  # init wrote that one: it stays as it is
                (data / rel).write_bytes(b"keep")
        marker = (data / "tidekeep-workspace.json").read_bytes()
        locations = [*files, str(home / "tidekeep.yaml")]
        for location in locations:
            with pytest.raises(tk.InvalidInput, match=r"^record 1: location .* tidekeep's "):
                client.catalog.add([{"feed": "F", "type": "Raw", "create_time": NOW, "location": location}])
        ids = insert_deleted(client, locations)
        report = client.catalog.purge()
        assert (report.purged, report.failures, remaining_ids(client)) == (0, len(locations), set(ids))
        assert all((data / rel).read_bytes() == b"keep" for rel in files if rel != "tidekeep-workspace.json")
        assert (data / "tidekeep-workspace.json").read_bytes() == marker
        assert (home / "tidekeep.yaml").read_text() == settings_text
        errors = {f["location"]: f["error"] for f in report.failed}
        for rel, what in files.items():
            assert f"lies inside tidekeep's {what} (" in errors[rel]
        assert (f"lies inside tidekeep's workspace settings file ({home}/tidekeep.yaml)"
                in errors[str(home / "tidekeep.yaml")])
    finally:
        client.close()


def test_data_roots_decide_absolute_locations_at_add(tmp_path: Path, metadata_url: str) -> None:
    root, sibling = tmp_path / "feeds", tmp_path / "feedsX"
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        clock=tk.ManualClock(NOW), settings={"catalog.data_roots": f"{root},s3://bucket/feeds"},
                            create=True)
    try:
        good = [str(root / "a.dat"), f"file://{root}/b.dat", "s3://bucket/feeds/x/c.dat", "catalog/d.dat"]
        ids = client.catalog.add([{"feed": "F", "type": "Raw", "create_time": NOW, "location": loc} for loc in good])
        assert [client.catalog.get(i).location for i in ids] == good  # stored as given
        for bad, reason in [(str(sibling / "a.dat"), "is not under any catalog.data_roots entry"),
                            (f"{root}/../feedsX/a.dat", "is not under any catalog.data_roots entry"),
                            ("s3://bucket/feedsX/a", "is not under any catalog.data_roots entry"),
                            ("s3://other/feeds/a", "is not under any catalog.data_roots entry"),
                            (str(root), "names a catalog.data_roots entry itself, not a file under it"),
                            ("../outside.dat", "is outside the storage root"),
                            ("", "is empty")]:
            with pytest.raises(tk.InvalidInput) as caught:
                client.catalog.add([{"feed": "F", "type": "Raw", "create_time": NOW, "location": "catalog/ok.dat"},
                                    {"feed": "F", "type": "Raw", "create_time": NOW, "location": bad}])
            assert str(caught.value) == f"record 2: location {bad!r} {reason}"
        assert remaining_ids(client) == set(ids)  # no refused add wrote anything
    finally:
        client.close()
    # without the data root, the same rows are refused by the purge: settings may change after the add
    plain = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                       clock=tk.ManualClock(NOW), create=True)
    try:
        root.mkdir()
        (root / "a.dat").write_bytes(b"a")
        with plain.workspace.db.write() as conn:
            conn.execute(sa.update(catalog_records).values(status="DELETED", status_time=NOW - 30 * DAY))
        report = plain.catalog.purge()
        assert report.failures == 3 and report.purged == 1  # catalog/d.dat: relative, never written
        assert (root / "a.dat").read_bytes() == b"a"
        assert "absolute locations need catalog.data_roots (none is configured)" in report.failed[0]["error"]
    finally:
        plain.close()


def test_a_symlink_inside_a_data_root_does_not_lead_the_purge_into_stream_data(client: tk.Client,
                                                                               tmp_path: Path) -> None:
    chunks = write_stream(client)
    before = payloads(client)
    root = tmp_path / "feeds"
    root.mkdir()
    (root / "streams-link").symlink_to(Path(client.workspace.storage.root) / "streams", target_is_directory=True)
    (root / "etc-link").symlink_to(tmp_path / "secret", target_is_directory=True)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_bytes(b"k")
    (root / "real.dat").write_bytes(b"r")
    settings = dict(client.settings.values, **{"catalog.data_roots": (str(root),)})
    with tk.Client(tk.config.Settings(client.settings.home, settings), tk.ManualClock(NOW)) as rooted:
        via_link = f"{root}/streams-link/{chunks[0][len('streams/'):]}"
        ids = rooted.catalog.add([  # lexically inside the data root: accepted at add time
            {"feed": "F", "type": "Raw", "create_time": NOW, "location": loc}
            for loc in (via_link, f"{root}/etc-link/key", f"{root}/real.dat")])
        with rooted.workspace.db.write() as conn:
            conn.execute(sa.update(catalog_records).values(status="DELETED", status_time=NOW - 30 * DAY))
        report = rooted.catalog.purge()
    assert (report.purged, report.failures) == (1, 2) and remaining_ids(client) == set(ids[:2])
    errors = {f["location"]: f["error"] for f in report.failed}
    real_chunk = f"{client.workspace.storage.root}/{chunks[0]}"
    assert errors[via_link] == (f"location {via_link!r} resolves through a symlink to {real_chunk}, which lies "
                                f"inside tidekeep's stream data ({client.workspace.storage.root}/streams)")
    assert "outside the storage root and every catalog.data_roots entry" in errors[f"{root}/etc-link/key"]
    assert (tmp_path / "secret" / "key").read_bytes() == b"k" and not (root / "real.dat").exists()
    assert payloads(client) == before


def test_generate_refuses_feeds_whose_locations_reach_tidekeeps_areas(client: tk.Client) -> None:
    for feed in ("../streams", "a/../../archives/x", "../../escape"):
        with pytest.raises(tk.InvalidInput, match=rf"^generate: feed {re.escape(repr(feed))} would put records at "):
            client.catalog.generate(10, feeds=[feed], with_files=True)
    assert remaining_ids(client) == set() and client.workspace.storage.list_files("streams") == []
    assert client.catalog.generate(5, feeds=["OK", "a/b"]).rows == 5


def test_the_audit_names_at_most_a_hundred_files_and_counts_them_all(tmp_path: Path, metadata_url: str) -> None:
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        clock=tk.ManualClock(NOW), create=True)
    try:
        count = 103
        ids = insert_deleted(client, [f"catalog/f{i}.dat" for i in range(count)])
        (tmp_path / "data" / "catalog").mkdir(parents=True)
        for i in range(count):
            (tmp_path / "data" / "catalog" / f"f{i}.dat").write_bytes(b"x" * (i + 1))
        report = client.catalog.purge()
        assert report.purged == count
        [entry] = purge_audit(client)
        details = json.loads(entry["details"])
        assert (details["files_removed"], details["files_omitted"], len(details["files"])) == (count, 3, 100)
        assert details["files"][0] == {"id": ids[0], "path": f"{client.workspace.storage.root}/catalog/f0.dat",
                                       "bytes": 1}
        assert entry["bytes_freed"] == sum(range(1, count + 1))  # measured, all files
        assert details["record_bytes"] == 7 * count  # what the rows said (file_size)
    finally:
        client.close()


def test_cli_refuses_with_one_error_line(tmp_path: Path, metadata_url: str) -> None:
    home, data = tmp_path / "ws", tmp_path / "data"
    flags = ["--metadata-url", metadata_url, "--storage", str(data)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
    env["TIDEKEEP_HOME"] = str(home)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tidekeep.cli.main", *flags, *args], capture_output=True,
                              text=True, env=env, timeout=120, check=False)

    assert cli("init").returncode == 0
    record = '{"feed": "F", "type": "Raw", "create_time": 1, "location": "%s"}'
    refused = cli("catalog", "add", record % "streams/s/x-1/0.parquet")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (f"error: record 1: location 'streams/s/x-1/0.parquet' lies inside tidekeep's "
                              f"stream data ({data.resolve()}/streams)\n")
    absolute = cli("catalog", "add", record % "/srv/feeds/a.dat")
    assert absolute.returncode == 2 and absolute.stderr == (
        "error: record 1: location '/srv/feeds/a.dat' is absolute, and absolute locations need "
        "catalog.data_roots (none is configured)\n")
    added = cli("--set", "catalog.data_roots=/srv/feeds", "catalog", "add", record % "/srv/feeds/a.dat")
    assert added.returncode == 0, added.stderr
    bad_root = cli("--set", f"catalog.data_roots={data}", "catalog", "list")
    assert bad_root.returncode == 2 and bad_root.stderr == (
        f"error: bad value for 'catalog.data_roots' in flags: {str(data.resolve())!r} contains tidekeep's "
        f"stream data ({data.resolve()}/streams)\n")
    relative = cli("--set", "catalog.data_roots=feeds", "catalog", "list")
    assert relative.returncode == 2 and relative.stderr == (
        "error: bad value for 'catalog.data_roots' in flags: 'feeds' is neither an absolute path nor a URI\n")


def test_a_symlink_to_a_path_that_is_not_utf8_is_a_failure_not_a_crash(tmp_path: Path, metadata_url: str) -> None:
    root = tmp_path / "feeds"
    root.mkdir()
    odd = os.fsencode(str(root)) + b"/\xff"
    os.mkdir(odd)
    with open(odd + b"/x", "wb") as handle:
        handle.write(b"x")
    (root / "link").symlink_to(os.fsdecode(odd), target_is_directory=True)
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        clock=tk.ManualClock(NOW), settings={"catalog.data_roots": [str(root)]}, create=True)
    try:
        [kept] = insert_deleted(client, [f"{root}/link/x"])
        report = client.catalog.purge()
        assert (report.purged, report.failures, remaining_ids(client)) == (0, 1, {kept})
        assert report.failed[0]["error"] == (f"location {f'{root}/link/x'!r} resolves to a path that is not "
                                             "valid UTF-8 text")
        assert os.path.exists(odd + b"/x")
    finally:
        client.close()
