"""The storage root's top-level areas, one per family: where each family keeps its files.

They live in the foundation because more than the owning family needs them: the catalog's
location rules keep records from pointing into any of them (catalog/location_rules.py), and the
collectors list only their own area (docs/workspace.md).
"""

from __future__ import annotations

STREAMS_DIR = "streams"  # chunk files and transaction staging, per stream (docs/streams.md)
ARCHIVES_DIR = "archives"  # log archives, per dataset (docs/archives.md)
RESULTS_DIR = "search-results"  # the results cache of search jobs (docs/archives-search.md)

__all__ = ["ARCHIVES_DIR", "RESULTS_DIR", "STREAMS_DIR"]
