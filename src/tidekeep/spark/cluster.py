"""Whether a job's files can work on the executors of a Spark master (pure decisions).

Executors of a Spark master other than local mode run on other machines. A local path the driver
hands them names a file on *their* disk: a SQLite metadata file there is a copy the driver never
reads, chunk or archive files written there are files the driver never sees, and an input log file
the driver found is not there at all. tidekeep therefore refuses, before any Spark work, a job whose
executors would open a SQLite metadata file, a local storage path or local input files when the
master is not local, unless `spark.shared_filesystem` declares that every executor sees the
driver's paths (the same files at the same paths: NFS, a cluster filesystem mount).

Which masters are local (their executors on the driver's machine) is masters.py's decision.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .credentials import password_refusal
from .masters import is_local_master

if TYPE_CHECKING:
    from ..config import Settings

_SHARED_HINT = "set spark.shared_filesystem: true if every executor sees the driver's files at the same paths"


def is_sqlite_url(url: str) -> bool:
    """A SQLAlchemy URL of the SQLite backend (`sqlite://…`, `sqlite+driver://…`)."""
    scheme = url.partition(":")[0]
    return scheme.partition("+")[0].strip().lower() == "sqlite"


def is_local_path(uri: str) -> bool:
    """A storage URI or input that names a path on this machine: a plain path or a file:// URI."""
    scheme, separator, _ = uri.partition("://")
    return not separator or scheme.strip().lower() == "file"


def cluster_refusal(master: str, *, shared_filesystem: bool, metadata_url: str | None = None,
                    storage_uri: str | None = None, inputs: Sequence[str] = ()) -> str | None:
    """Why a job whose executors open `metadata_url`, `storage_uri` and `inputs` (None / empty: they
    do not) cannot work on the executors of `master`; None when it can. The metadata store is
    looked at first, then the storage, then the inputs in order."""
    if shared_filesystem or is_local_master(master):
        return None
    if metadata_url is not None and is_sqlite_url(metadata_url):
        return (f"metadata.url {metadata_url!r} is a SQLite file, and the executors of Spark master {master!r} "
                "would open it on their own disks, writing to copies the driver never reads; use PostgreSQL, "
                f"or {_SHARED_HINT}")
    if storage_uri is not None and is_local_path(storage_uri):
        return (f"storage.uri {storage_uri!r} is a local path, and the executors of Spark master {master!r} "
                "would read and write it on their own disks, where the driver cannot see; use a storage every "
                f"executor reaches (s3://…, gs://…, hdfs://…), or {_SHARED_HINT}")
    for path in inputs:
        if is_local_path(path):
            return (f"input {path!r} is a local path, and the executors of Spark master {master!r} would look "
                    f"for it on their own disks; put the inputs where every executor sees them and {_SHARED_HINT}")
    return None


def check_cluster_reach(master: str, *, shared_filesystem: bool, metadata_url: str | None = None,
                        storage_uri: str | None = None, inputs: Sequence[str] = ()) -> None:
    """ConfigError with cluster_refusal's reason, if there is one."""
    reason = cluster_refusal(master, shared_filesystem=shared_filesystem, metadata_url=metadata_url,
                             storage_uri=storage_uri, inputs=inputs)
    if reason is not None:
        raise ConfigError(reason)


def check_settings_reach(settings: Settings, master: str | None = None, *, metadata: bool = False,
                         storage: bool = False, inputs: Sequence[str] = ()) -> None:
    """check_cluster_reach for a job whose executors open the settings' metadata store (`metadata`),
    their storage (`storage`) and `inputs`, on `master` (default: the `spark.master` setting). With
    `metadata`, also refused: a metadata password the executors could get no reference to
    (credentials.py), as it would have to travel in clear."""
    master = settings["spark.master"] if master is None else master
    if metadata:
        refusal = password_refusal(settings.metadata_url, master, os.environ)
        if refusal is not None:
            raise ConfigError(refusal)
    check_cluster_reach(master,
                        shared_filesystem=settings["spark.shared_filesystem"],
                        metadata_url=settings.metadata_url if metadata else None,
                        storage_uri=settings.storage_uri if storage else None, inputs=inputs)


__all__ = ["check_cluster_reach", "check_settings_reach", "cluster_refusal", "is_local_master", "is_local_path",
           "is_sqlite_url"]
