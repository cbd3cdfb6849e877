"""Holds in the foundation (store/holds.py): one way to ask "what holds cover this?" for every
family's things, the kinds each family registers, and the layering (only store/holds.py touches
the holds table; no family imports the client-level holds module)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.archives import make_archive
from helpers.imports import SRC, imported_modules
from tidekeep.errors import InvalidInput
from tidekeep.store.holds import HOLD_KINDS, holds_covering, kind_named
from tidekeep.store.schema_archives import archives

HOUR = 3_600_000
T0 = 1_700_000_000_000


@pytest.fixture
def hclient(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), settings={"archive_output.retention_period": 60}, create=True)
    yield c
    c.close()


def record_of(client: tk.Client, archive_id: str) -> str:
    with client.workspace.db.read() as conn:
        query = sa.select(archives.c.catalog_record_id).where(archives.c.id == archive_id)
        return str(conn.execute(query).scalar_one())


def test_an_archive_is_covered_by_its_dataset_hold_and_by_a_records_hold_on_its_record(hclient: tk.Client) -> None:
    """`active_for("archive", id)` says what protects the archive: before, it named only holds on the
    archive id itself and answered "nothing" for an archive its dataset's hold kept from the collector."""
    held = make_archive(hclient, "legal", [(T0 - 3 * HOUR, "a")])
    free = make_archive(hclient, "web", [(T0 - 3 * HOUR, "b")])
    on_dataset = hclient.holds.add("dataset", "legal", "litigation 42")
    assert [h.id for h in hclient.holds.active_for("archive", held.id)] == [on_dataset]
    assert hclient.holds.active_for("archive", free.id) == []
    on_records = hclient.holds.add("records", 'feed = "web" and type = "Archive"', "case 3")
    on_archive = hclient.holds.add("archive", held.id, "its own")
    assert [h.id for h in hclient.holds.active_for("archive", held.id)] == [on_dataset, on_archive]
    assert [h.id for h in hclient.holds.active_for("archive", free.id)] == [on_records]
    hclient.holds.remove(on_dataset)
    assert [h.id for h in hclient.holds.active_for("archive", held.id)] == [on_archive]


def test_a_catalog_record_is_covered_by_matching_records_holds_and_its_archive_holds(hclient: tk.Client) -> None:
    archive = make_archive(hclient, "legal", [(T0 - 3 * HOUR, "a")])
    [plain] = hclient.catalog.add([{"feed": "F", "type": "Raw", "create_time": T0 - HOUR}])
    by_feed = hclient.holds.add("records", 'feed = "F"', "case 1")
    by_dataset = hclient.holds.add("dataset", "legal", "case 2")
    with hclient.workspace.db.read() as conn:
        assert [h.id for h in holds_covering(conn, "record", str(plain), T0)] == [by_feed]
        assert [h.id for h in holds_covering(conn, "record", record_of(hclient, archive.id), T0)] == [by_dataset]
        assert holds_covering(conn, "record", "not-an-id", T0) == []
        # a stream is covered only by holds on it, exactly
        assert holds_covering(conn, "stream", "legal/none", T0) == []


def test_every_kind_is_registered_by_its_family() -> None:
    assert {kind_named(k).name for k in HOLD_KINDS} == set(HOLD_KINDS)
    with pytest.raises(InvalidInput, match="unknown hold kind 'x'"):
        kind_named("x")


def test_only_the_foundation_touches_the_holds_table() -> None:
    offenders = [str(p.relative_to(SRC)) for p in sorted(SRC.rglob("*.py"))
                 if "tidekeep.store.schema_holds" in imported_modules(p)
                 and p.relative_to(SRC).as_posix() not in ("store/holds.py", "store/schema.py")]
    assert offenders == []


@pytest.mark.parametrize("family", ["store", "streams", "catalog", "archives", "spark"])
def test_no_family_imports_the_holds_above_it(family: str) -> None:
    offenders = [f"{p.relative_to(SRC)} imports {name}" for p in sorted((SRC / family).rglob("*.py"))
                 for name in imported_modules(p) if name == "tidekeep.holds"]
    assert offenders == []


def test_the_families_hold_rules_load_on_the_first_lookup_not_on_import() -> None:
    """Importing the client-level holds module (the client does) registers a loader only: the
    families' hold modules, and the catalog expressions a records hold needs, load on the first
    lookup, which then finds every kind and the catalog's coverage of an archive."""
    probe = """
import json, sys
import tidekeep.holds
from tidekeep.store.holds import kind_named
before = sorted(m for m in sys.modules if m.endswith(".holds") and m.startswith("tidekeep.")
                or m.startswith("tidekeep.catalog.expressions"))
kinds = sorted(kind_named(k).name for k in ("stream", "records", "dataset", "archive"))
after = [m for m in ("tidekeep.streams.holds", "tidekeep.catalog.holds", "tidekeep.archives.holds")
         if m in sys.modules]
print(json.dumps([before, kinds, after]))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    before, kinds, after = json.loads(done.stdout)
    assert before == ["tidekeep.holds", "tidekeep.store.holds"]
    assert kinds == ["archive", "dataset", "records", "stream"]
    assert after == ["tidekeep.streams.holds", "tidekeep.catalog.holds", "tidekeep.archives.holds"]
