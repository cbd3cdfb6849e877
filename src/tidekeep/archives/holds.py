"""Holds of kinds "dataset" (target: a dataset name) and "archive" (target: an archive id),
registered with the foundation (store/holds.py).

The archive collector never expires a held archive (archives/gc.py): one whose dataset or own id
is held. Adding either kind locks the dataset's row, as the collector does, so a hold and a
collection of one dataset serialise. An archive is also covered by the holds on its dataset.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import NotFound
from ..store.holds import Hold, HoldKind, holds_of, holds_on, register_coverage, register_kind
from ..store.schema_archives import archives as archives_table
from .model import check_archive_id, check_dataset
from .store import lock_dataset

DATASET_KIND = "dataset"
ARCHIVE_KIND = "archive"


def lock_held_dataset(conn: Connection, target: object) -> str:
    dataset = check_dataset(target)
    lock_dataset(conn, dataset)  # NotFound if there is no such dataset
    return dataset


def lock_held_archive(conn: Connection, target: object) -> str:
    archive_id = check_archive_id(target)
    dataset = dataset_of(conn, archive_id)
    if dataset is None:
        raise NotFound(f"archive {archive_id} does not exist")
    lock_dataset(conn, dataset)
    return archive_id


def dataset_of(conn: Connection, archive_id: str) -> str | None:
    query = sa.select(archives_table.c.dataset).where(archives_table.c.id == archive_id)
    return conn.execute(query).scalar_one_or_none()


def load_holds(conn: Connection) -> tuple[set[str], set[str]]:
    """(held datasets, held archive ids), read on the caller's connection."""
    held = holds_of(conn, (DATASET_KIND, ARCHIVE_KIND))
    return {h.target for h in held if h.kind == DATASET_KIND}, {h.target for h in held if h.kind == ARCHIVE_KIND}


def dataset_holds_on_archive(conn: Connection, archive_id: str, now_ms: int) -> list[Hold]:
    """The holds on the dataset an archive belongs to."""
    dataset = dataset_of(conn, archive_id)
    return [] if dataset is None else holds_on(conn, DATASET_KIND, dataset)


register_kind(HoldKind(DATASET_KIND, lock_held_dataset))
register_kind(HoldKind(ARCHIVE_KIND, lock_held_archive))
register_coverage("archive", dataset_holds_on_archive)

__all__ = ["ARCHIVE_KIND", "DATASET_KIND", "dataset_holds_on_archive", "load_holds", "lock_held_archive",
           "lock_held_dataset"]
