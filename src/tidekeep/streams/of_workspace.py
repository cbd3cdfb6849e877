"""The stream stores of a workspace, for code that works below the public API: the service's
workspace-wide work (which streams have a policy, which are due a watermark, pruning every
stream's watermarks) and work under a lease fence. Everyday per-stream use goes through the stream
handle, `client.stream(name)` (docs/python-api.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store.house import Workspace
from .controller import StreamController

if TYPE_CHECKING:
    from .retention_store import RetentionManager
    from .watermark_store import WatermarkStore


def stream_controller(workspace: Workspace) -> StreamController:
    """A controller over the workspace's database, storage, clock and audit actor. It holds no state
    of its own beyond these, so any number of them over one workspace agree."""
    return StreamController(workspace.db, workspace.storage, workspace.clock, workspace.audit.actor)


def retention_manager(workspace: Workspace, controller: StreamController | None = None) -> RetentionManager:
    """Size/time retention cycles over the workspace, at its `retention.frequency`."""
    from .retention_store import RetentionManager  # on use: describing a stream needs no retention code

    return RetentionManager(controller or stream_controller(workspace), workspace.settings["retention.frequency"])


def watermark_store(workspace: Workspace, controller: StreamController | None = None) -> WatermarkStore:
    """Writer marks and watermarks over the workspace."""
    from .watermark_store import WatermarkStore  # on use, as retention_manager

    return WatermarkStore(controller or stream_controller(workspace))
