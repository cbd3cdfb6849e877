"""The workspace as the Spark sources and the sink open it in the driver's Python worker.

Spark plans reads and commits sink batches in a Python worker of its own, which opens the workspace
from the options (`metadata_url`, `storage`, ...) with settings resolved as `tidekeep.connect()`
resolves them. It needs the workspace (store/house.py) and the stream stores built on it, not the
client facade: the Spark layer sits below the client (docs/workspace.md, "The house").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import load_settings
from ..store.house import Workspace, open_workspace
from ..streams.controller import StreamController
from ..streams.txn import TransactionalWriter
from ..streams.txn_store import TransactionStore
from ..streams.watermark_store import WatermarkStore
from ..units import parse_duration_ms
from .cluster import check_settings_reach
from .credentials import MetadataReference


@dataclass(frozen=True)
class DriverWorkspace:
    """An open workspace with the stream controller and the stores the sources and the sink use."""

    workspace: Workspace
    streams: StreamController
    transactions: TransactionStore
    watermarks: WatermarkStore

    def transactional_writer(self, stream: str, writer_id: str, lease: int | str) -> TransactionalWriter:
        """Begins transactions on `stream` with the workspace's writer.batch_size, as the client's does."""
        size = self.workspace.settings["writer.batch_size"]
        return TransactionalWriter(self.transactions, stream, writer_id, parse_duration_ms(lease), size)

    def close(self) -> None:
        self.workspace.close()


def open_driver_workspace(home: str | None, metadata: MetadataReference | None, storage: str | None,
                          shared_filesystem: str | None, fsync: str | None = None) -> DriverWorkspace:
    """The workspace the options name (settings: defaults < tidekeep.yaml < TIDEKEEP_* env < these
    options; the metadata password read from its reference here). Executors of the sources and
    the sink open its storage: one they could not reach on the session's master (the spark.master
    setting, which register_data_sources sets to the session's) is refused with ConfigError,
    unless the filesystem is declared shared (cluster.py)."""
    overrides: dict[str, Any] = {key: value for key, value in (("spark.shared_filesystem", shared_filesystem),
                                                               ("storage.fsync", fsync)) if value}
    if metadata is not None:
        overrides["metadata.url"] = metadata.url()
    if storage is not None:
        overrides["storage.uri"] = storage
    settings = load_settings(home, overrides)
    # before the workspace opens: opening migrates a store an older tidekeep left
    check_settings_reach(settings, storage=True)
    workspace = open_workspace(settings)
    try:
        streams = StreamController(workspace.db, workspace.storage, workspace.clock, workspace.audit.actor)
    except BaseException:
        workspace.close()
        raise
    return DriverWorkspace(workspace, streams, TransactionStore(streams), WatermarkStore(streams))


__all__ = ["DriverWorkspace", "open_driver_workspace"]
