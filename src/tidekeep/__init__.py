"""tidekeep: keeps streaming and log data exactly as long as policy says."""

from .client import Client, connect, init_workspace
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
from .holds import Hold, HoldStore
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

__all__ = [
    "AlreadyExists",
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
    "Hold",
    "HoldActive",
    "HoldStore",
    "InvalidInput",
    "InvalidName",
    "InvalidStreamCut",
    "ManualClock",
    "NotFound",
    "Position",
    "ReaderConfig",
    "ReaderGroup",
    "ReaderGroupConfig",
    "RetentionDecision",
    "RetentionKind",
    "RetentionManager",
    "RetentionPolicy",
    "RetentionRecord",
    "RetentionType",
    "SegmentId",
    "StagedFileMissing",
    "StoreUnavailable",
    "StreamConfig",
    "StreamCut",
    "StreamSealed",
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
    "WorkspaceMismatch",
    "Writer",
    "WriterConfig",
    "WriterFenced",
    "WriterMark",
    "WriterStatus",
    "connect",
    "init_workspace",
]
