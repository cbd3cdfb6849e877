"""What the two garbage collectors (gc.py for archives, gc_results.py for search results) share:
their logger, whose level the garbage_collector.logging_level setting sets, and where the files they
could not delete are left (docs/archives-retention.md)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store.house import Workspace

log = logging.getLogger("tidekeep.archives.gc")
LEFT_FOR = "the next collector run"


def configure_gc_logging(workspace: Workspace) -> None:
    log.setLevel(logging.getLevelName(workspace.settings["garbage_collector.logging_level"]))


__all__ = ["LEFT_FOR", "configure_gc_logging", "log"]
