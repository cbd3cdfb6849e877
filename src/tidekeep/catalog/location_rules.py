"""The location rules of a workspace, from its settings: the shell around locations.py.

tidekeep's own areas (the storage root's `streams/`, `archives/` and `search-results/`, the
workspace id file, the SQLite metadata file with its siblings, the workspace's tidekeep.yaml) are
listed by tidekeep/workspace_areas.py, which the settings check `catalog.data_roots` with too;
here they are taken from a workspace's settings. A local area is listed both as written
(absolute) and with its symlinks resolved, so neither spelling of it can be reached.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..config import CONFIG_FILE_NAME
from ..places import Area, Place, parse_absolute, parse_root, split_options
from ..workspace_areas import (
    SQLITE_SIBLINGS,
    STORAGE_AREAS,
    STREAMS_DIR,
    real_place,
    sqlite_file,
    storage_root,
)
from ..workspace_areas import data_root_problem as data_roots_problem
from ..workspace_areas import tidekeep_areas as areas_of
from .locations import LocationRules

if TYPE_CHECKING:
    from ..config import Settings


def settings_file(settings: Settings) -> str:
    """The workspace's settings file (tidekeep.yaml), one of its areas."""
    return str(settings.home / CONFIG_FILE_NAME)


def tidekeep_areas(settings: Settings) -> tuple[Area, ...]:
    return areas_of(settings.storage_uri, settings.metadata_url, settings_file(settings))


def location_rules(settings: Settings) -> LocationRules:
    """The rules every record's location is checked against, at add/import time and by the purge."""
    roots = tuple(parse_root(text) for text in settings["catalog.data_roots"])
    return LocationRules(storage_root(settings.storage_uri), tidekeep_areas(settings), roots)


def data_root_options(settings: Settings) -> tuple[tuple[Place, str], ...]:
    """Each data root's place with its pyarrow options (the URI's query, "" for none), for opening
    the store a record's data is on (locations.options_for)."""
    return tuple((parse_root(text), split_options(text)[1]) for text in settings["catalog.data_roots"])


def real_rules(rules: LocationRules) -> LocationRules:
    """The same rules with every local place's symlinks resolved, for `locations.decide_real`."""
    return LocationRules(real_place(rules.storage_root),
                         tuple(dict.fromkeys(Area(real_place(a.place), a.what) for a in rules.areas)),
                         tuple(real_place(r) for r in rules.data_roots))


def real_file(place: Place) -> Place:
    """A local file's place with the symlinks of its directories resolved (the file itself may be
    a symlink: deleting it removes the link, not its target)."""
    folder, _, name = place.path.rpartition("/")
    return parse_absolute(os.path.realpath(folder or "/").rstrip("/") + "/" + name)


def data_root_problem(settings: Settings) -> str | None:
    """Why `catalog.data_roots` is not acceptable (an entry overlaps one of tidekeep's areas, as
    written or with symlinks resolved), or None."""
    return data_roots_problem(settings["catalog.data_roots"], settings.storage_uri, settings.metadata_url,
                              settings_file(settings))


__all__ = ["SQLITE_SIBLINGS", "STORAGE_AREAS", "STREAMS_DIR", "data_root_options", "data_root_problem",
           "location_rules", "real_file",
           "real_rules", "sqlite_file", "storage_root", "tidekeep_areas"]
