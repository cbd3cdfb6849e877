"""The storage root's top-level areas, one per family: where each family keeps its files.

The families take the names from the store, and the collectors list only their own area
(docs/workspace.md). The names are defined below the settings (tidekeep/workspace_areas.py):
the settings refuse a `catalog.data_roots` entry that overlaps one, and the catalog's location
rules keep records from pointing into any of them (catalog/location_rules.py).
"""

from __future__ import annotations

from ..workspace_areas import ARCHIVES_DIR, RESULTS_DIR, STREAMS_DIR

__all__ = ["ARCHIVES_DIR", "RESULTS_DIR", "STREAMS_DIR"]
