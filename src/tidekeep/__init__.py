"""tidekeep: keeps streaming and log data exactly as long as policy says.

The package's names are loaded on first use (PEP 562, a module `__getattr__`): `import tidekeep`
costs only the errors and the clock, so the `tidekeep` command's `--help` and the commands that need
no data never import SQLAlchemy, pyarrow or Spark (docs/cli.md, "Start-up time"). Every name in
`__all__` resolves, and type checkers see the real imports below; tests/test_lazy_imports.py keeps
the three lists in step.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .clock import Clock, ManualClock, SystemClock
from .errors import (
    AlreadyExists,
    ChunkError,
    ChunkMissing,
    ConfigError,
    ConflictError,
    CorruptChunk,
    EventTooLarge,
    HoldActive,
    InvalidInput,
    InvalidName,
    InvalidStreamCut,
    NotFound,
    RunInProgress,
    StagedFileMissing,
    StoreUnavailable,
    StreamSealed,
    TidekeepError,
    TransactionClosed,
    TransactionExpired,
    TruncatedData,
    WorkspaceMismatch,
    WriterFenced,
)

if TYPE_CHECKING:
    from .archives.api import Archives
    from .archives.gc import GcReport
    from .archives.ingest import IngestReport
    from .archives.model import Archive, JobState, SearchJob
    from .archives.results import ResultsPage
    from .catalog.ages import Age
    from .catalog.api import Catalog
    from .catalog.explain import Explanation
    from .catalog.generate import GenerateReport
    from .catalog.impact import ImpactSummary
    from .catalog.importer import ImportReport
    from .catalog.job import RunReport
    from .catalog.purge import PurgeReport
    from .catalog.records import MetaRecord
    from .catalog.rules import RetentionRule, RuleSet
    from .client import Client, connect, init_workspace
    from .holds import Hold, HoldStore
    from .store.house import Workspace
    from .stream_handle import Stream, StreamRetention, StreamWatermarks
    from .streams.config import RetentionKind, RetentionPolicy, StreamConfig
    from .streams.cuts import CutOrder, StreamCut
    from .streams.model import SegmentId
    from .streams.reader import Event
    from .streams.readergroup import (
        Checkpoint,
        CheckpointTimeout,
        EventRead,
        Position,
        ReaderConfig,
        ReaderGroup,
        ReaderGroupConfig,
        RetentionType,
    )
    from .streams.retention import RetentionDecision, RetentionRecord
    from .streams.retention_store import RetentionManager
    from .streams.rg_state import TooManyCheckpoints
    from .streams.txn import Transaction, TransactionalWriter
    from .streams.txn_store import TransactionInfo, TxnAbortResult, TxnCommitResult, TxnState
    from .streams.watermark_store import WatermarkStore, WriterStatus
    from .streams.watermarks import TimeWindow, Watermark, WriterMark
    from .streams.writer import Writer, WriterConfig

__version__ = "0.1.0"

# name -> the module (relative to this package) that defines it, imported on first access
_LAZY_EXPORTS: dict[str, str] = {
    "Age": ".catalog.ages",
    "Archive": ".archives.model",
    "Archives": ".archives.api",
    "Catalog": ".catalog.api",
    "Checkpoint": ".streams.readergroup",
    "CheckpointTimeout": ".streams.readergroup",
    "Client": ".client",
    "CutOrder": ".streams.cuts",
    "Event": ".streams.reader",
    "EventRead": ".streams.readergroup",
    "Explanation": ".catalog.explain",
    "GcReport": ".archives.gc",
    "GenerateReport": ".catalog.generate",
    "Hold": ".holds",
    "HoldStore": ".holds",
    "ImpactSummary": ".catalog.impact",
    "ImportReport": ".catalog.importer",
    "IngestReport": ".archives.ingest",
    "JobState": ".archives.model",
    "MetaRecord": ".catalog.records",
    "Position": ".streams.readergroup",
    "PurgeReport": ".catalog.purge",
    "ReaderConfig": ".streams.readergroup",
    "ReaderGroup": ".streams.readergroup",
    "ReaderGroupConfig": ".streams.readergroup",
    "ResultsPage": ".archives.results",
    "RetentionDecision": ".streams.retention",
    "RetentionKind": ".streams.config",
    "RetentionManager": ".streams.retention_store",
    "RetentionPolicy": ".streams.config",
    "RetentionRecord": ".streams.retention",
    "RetentionRule": ".catalog.rules",
    "RetentionType": ".streams.readergroup",
    "RuleSet": ".catalog.rules",
    "RunReport": ".catalog.job",
    "SearchJob": ".archives.model",
    "SegmentId": ".streams.model",
    "Stream": ".stream_handle",
    "StreamConfig": ".streams.config",
    "StreamCut": ".streams.cuts",
    "StreamRetention": ".stream_handle",
    "StreamWatermarks": ".stream_handle",
    "TimeWindow": ".streams.watermarks",
    "TooManyCheckpoints": ".streams.rg_state",
    "Transaction": ".streams.txn",
    "TransactionInfo": ".streams.txn_store",
    "TransactionalWriter": ".streams.txn",
    "TxnAbortResult": ".streams.txn_store",
    "TxnCommitResult": ".streams.txn_store",
    "TxnState": ".streams.txn_store",
    "Watermark": ".streams.watermarks",
    "WatermarkStore": ".streams.watermark_store",
    "Workspace": ".store.house",
    "Writer": ".streams.writer",
    "WriterConfig": ".streams.writer",
    "WriterMark": ".streams.watermarks",
    "WriterStatus": ".streams.watermark_store",
    "connect": ".client",
    "init_workspace": ".client",
}

__all__ = [
    "Age",
    "AlreadyExists",
    "Archive",
    "Archives",
    "Catalog",
    "Checkpoint",
    "CheckpointTimeout",
    "ChunkError",
    "ChunkMissing",
    "Client",
    "Clock",
    "ConfigError",
    "ConflictError",
    "CorruptChunk",
    "CutOrder",
    "Event",
    "EventRead",
    "EventTooLarge",
    "Explanation",
    "GcReport",
    "GenerateReport",
    "Hold",
    "HoldActive",
    "HoldStore",
    "ImpactSummary",
    "ImportReport",
    "IngestReport",
    "InvalidInput",
    "InvalidName",
    "InvalidStreamCut",
    "JobState",
    "ManualClock",
    "MetaRecord",
    "NotFound",
    "Position",
    "PurgeReport",
    "ReaderConfig",
    "ReaderGroup",
    "ReaderGroupConfig",
    "ResultsPage",
    "RetentionDecision",
    "RetentionKind",
    "RetentionManager",
    "RetentionPolicy",
    "RetentionRecord",
    "RetentionRule",
    "RetentionType",
    "RuleSet",
    "RunInProgress",
    "RunReport",
    "SearchJob",
    "SegmentId",
    "StagedFileMissing",
    "StoreUnavailable",
    "Stream",
    "StreamConfig",
    "StreamCut",
    "StreamRetention",
    "StreamSealed",
    "StreamWatermarks",
    "SystemClock",
    "TidekeepError",
    "TimeWindow",
    "TooManyCheckpoints",
    "Transaction",
    "TransactionClosed",
    "TransactionExpired",
    "TransactionInfo",
    "TransactionalWriter",
    "TruncatedData",
    "TxnAbortResult",
    "TxnCommitResult",
    "TxnState",
    "Watermark",
    "WatermarkStore",
    "Workspace",
    "WorkspaceMismatch",
    "Writer",
    "WriterConfig",
    "WriterFenced",
    "WriterMark",
    "WriterStatus",
    "connect",
    "init_workspace",
]


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups find it directly, without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
