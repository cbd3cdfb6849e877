"""The location rules of a workspace, from its settings: the shell around locations.py.

tidekeep's own areas are the storage root's `streams/` (chunk files, and each stream's `txn/`
staging: streams/<scope>/<stream>-<uid>/, docs/streams.md), `archives/` and `search-results/`
(docs/archives.md), the workspace id file at its top (docs/workspace.md), the SQLite metadata
file with its -wal, -shm, -journal and .migrate.lock siblings, and the workspace's tidekeep.yaml.
A local area is listed both as written (absolute) and with its symlinks resolved, so neither
spelling of it can be reached.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..store.layout import ARCHIVES_DIR, RESULTS_DIR, STREAMS_DIR
from ..store.workspace import MARKER_FILE
from .locations import Area, LocationRules, Place, Refused, check_data_root, parse_absolute, parse_uri

if TYPE_CHECKING:
    from ..config import Settings

STORAGE_AREAS = ((STREAMS_DIR, "stream data"), (ARCHIVES_DIR, "log archives"), (RESULTS_DIR, "search results"),
                 (MARKER_FILE, "workspace id file"))
SQLITE_SIBLINGS = ("", "-wal", "-shm", "-journal", ".migrate.lock")


def _local_spellings(path: str) -> list[Place]:
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
    import sqlalchemy as sa  # on use: the settings module imports this one when data roots are set

    try:
        url = sa.engine.make_url(metadata_url)
    except (sa.exc.ArgumentError, ValueError):
        return None  # not a URL: the metadata store reports it when it opens
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return url.database


def tidekeep_areas(settings: Settings) -> tuple[Area, ...]:
    areas: list[Area] = []
    uri = settings.storage_uri
    roots = [storage_root(uri)] if "://" in uri else _local_spellings(uri)
    for root in roots:
        areas.extend(Area(root.child(name), what) for name, what in STORAGE_AREAS)
    database = sqlite_file(settings.metadata_url)
    if database is not None:
        for suffix in SQLITE_SIBLINGS:
            areas.extend(Area(place, "metadata database") for place in _local_spellings(database + suffix))
    from ..config import CONFIG_FILE_NAME

    areas.extend(Area(place, "workspace settings file")
                 for place in _local_spellings(str(settings.home / CONFIG_FILE_NAME)))
    return tuple(dict.fromkeys(areas))


def location_rules(settings: Settings) -> LocationRules:
    """The rules every record's location is checked against, at add/import time and by the purge."""
    roots = tuple(parse_absolute(text) for text in settings["catalog.data_roots"])
    return LocationRules(storage_root(settings.storage_uri), tidekeep_areas(settings), roots)


def _real(place: Place) -> Place:
    return parse_absolute(os.path.realpath(place.path)) if place.scheme == "file" else place


def real_rules(rules: LocationRules) -> LocationRules:
    """The same rules with every local place's symlinks resolved, for `locations.decide_real`."""
    return LocationRules(_real(rules.storage_root),
                         tuple(dict.fromkeys(Area(_real(a.place), a.what) for a in rules.areas)),
                         tuple(_real(r) for r in rules.data_roots))


def real_file(place: Place) -> Place:
    """A local file's place with the symlinks of its directories resolved (the file itself may be
    a symlink: deleting it removes the link, not its target)."""
    folder, _, name = place.path.rpartition("/")
    return parse_absolute(os.path.realpath(folder or "/").rstrip("/") + "/" + name)


def data_root_problem(settings: Settings) -> str | None:
    """Why `catalog.data_roots` is not acceptable (an entry overlaps one of tidekeep's areas, as
    written or with symlinks resolved), or None."""
    if not settings["catalog.data_roots"]:
        return None
    areas = tidekeep_areas(settings)
    for text in settings["catalog.data_roots"]:
        root = parse_absolute(text)
        for spelling in ([root, _real(root)] if root.scheme == "file" else [root]):
            reason = check_data_root(spelling, areas)
            if reason is not None:
                return f"{text!r} {reason}"
    return None


__all__ = ["STORAGE_AREAS", "STREAMS_DIR", "data_root_problem", "location_rules", "real_file", "real_rules",
           "sqlite_file", "storage_root", "tidekeep_areas"]
