"""The stream controller of a workspace, for code that works below the public API."""

from __future__ import annotations

from ..store.house import Workspace
from .controller import StreamController


def stream_controller(workspace: Workspace) -> StreamController:
    """A controller over the workspace's database, storage, clock and audit actor. It holds no state
    of its own beyond these, so any number of them over one workspace agree."""
    return StreamController(workspace.db, workspace.storage, workspace.clock, workspace.audit.actor)
