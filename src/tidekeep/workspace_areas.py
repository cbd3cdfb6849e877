"""tidekeep's own areas in a workspace, and whether a `catalog.data_roots` entry overlaps one.

The areas are the storage root's top-level directories, one per family (`streams/`: chunk files,
and each stream's `txn/` staging, docs/streams.md; `archives/` and `search-results/`,
docs/archives.md), the workspace id file at the storage root's top (docs/workspace.md), the SQLite
metadata file with its -wal, -shm, -journal and .migrate.lock siblings, and the workspace's
settings file. A local area is listed both as written (absolute) and with its symlinks resolved,
so neither spelling of it can be reached.

The names sit below the settings because three layers need them: the store lays its files out by
them (store/layout.py, store/workspace.py), the settings refuse a data root that overlaps an area
(config.py), and the catalog keeps record locations out of every area (catalog/location_rules.py).
Everything here takes plain values (URIs, URLs, paths), not the settings object.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .errors import ConfigError
from .places import Area, Place, Refused, overlap, parse_absolute, parse_root, parse_uri

STREAMS_DIR = "streams"  # chunk files and transaction staging, per stream (docs/streams.md)
ARCHIVES_DIR = "archives"  # log archives, per dataset (docs/archives.md)
RESULTS_DIR = "search-results"  # the results cache of search jobs (docs/archives-search.md)
MARKER_FILE = "tidekeep-workspace.json"  # the workspace id at the storage root's top (docs/workspace.md)

STORAGE_AREAS = ((STREAMS_DIR, "stream data"), (ARCHIVES_DIR, "log archives"), (RESULTS_DIR, "search results"),
                 (MARKER_FILE, "workspace id file"))
SQLITE_SIBLINGS = ("", "-wal", "-shm", "-journal", ".migrate.lock")


def local_spellings(path: str) -> list[Place]:
    """A local path as written (made absolute) and with its symlinks resolved."""
    try:
        places = [parse_absolute(os.path.abspath(path)), parse_absolute(os.path.realpath(path))]
    except Refused as exc:
        raise ConfigError(f"cannot tell where {path!r} is: its path {exc.args[0]}") from None
    return places if places[0] != places[1] else places[:1]


def storage_root(storage_uri: str) -> Place:
    """The storage root as ChunkStorage opens it (a local path resolved, a URI without options)."""
    if "://" in storage_uri:
        try:
            return parse_uri(storage_uri, keep_query=True)
        except Refused as exc:
            raise ConfigError(f"bad value for 'storage.uri': {storage_uri!r} {exc}") from None
    return parse_absolute(str(Path(storage_uri).resolve()))


def sqlite_file(metadata_url: str) -> str | None:
    """The SQLite database file of a metadata URL; None for other databases and in-memory SQLite."""
    import sqlalchemy as sa  # on use: the settings import this module only when data roots are set

    try:
        url = sa.engine.make_url(metadata_url)
    except (sa.exc.ArgumentError, ValueError):
        return None  # not a URL: the metadata store reports it when it opens
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return url.database


def tidekeep_areas(storage_uri: str, metadata_url: str, settings_file: str) -> tuple[Area, ...]:
    """Every area of the workspace with this storage root, metadata URL and settings file."""
    areas: list[Area] = []
    roots = [storage_root(storage_uri)] if "://" in storage_uri else local_spellings(storage_uri)
    for root in roots:
        areas.extend(Area(root.child(name), what) for name, what in STORAGE_AREAS)
    database = sqlite_file(metadata_url)
    if database is not None:
        for suffix in SQLITE_SIBLINGS:
            areas.extend(Area(place, "metadata database") for place in local_spellings(database + suffix))
    areas.extend(Area(place, "workspace settings file") for place in local_spellings(settings_file))
    return tuple(dict.fromkeys(areas))


def real_place(place: Place) -> Place:
    """A local place with its symlinks resolved; any other place as it is."""
    return parse_absolute(os.path.realpath(place.path)) if place.scheme == "file" else place


def data_root_problem(data_roots: Iterable[str], storage_uri: str, metadata_url: str,
                      settings_file: str) -> str | None:
    """Why the `catalog.data_roots` entries (in normal form) are not acceptable (an entry overlaps
    one of the workspace's areas, as written or with symlinks resolved), or None."""
    roots = list(data_roots)
    if not roots:
        return None
    areas = tidekeep_areas(storage_uri, metadata_url, settings_file)
    for text in roots:
        root = parse_root(text)
        for spelling in ([root, real_place(root)] if root.scheme == "file" else [root]):
            reason = overlap(spelling, areas)
            if reason is not None:
                return f"{text!r} {reason}"
    return None


__all__ = ["ARCHIVES_DIR", "MARKER_FILE", "RESULTS_DIR", "SQLITE_SIBLINGS", "STORAGE_AREAS", "STREAMS_DIR",
           "data_root_problem", "local_spellings", "real_place", "sqlite_file", "storage_root", "tidekeep_areas"]
