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
    InvalidInput,
    InvalidName,
    InvalidStreamCut,
    NotFound,
    StreamSealed,
    TidekeepError,
    TruncatedData,
)
from .streams.config import RetentionKind, RetentionPolicy, StreamConfig
from .streams.cuts import CutOrder, StreamCut
from .streams.reader import Event

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists", "ChunkError", "ChunkMissing", "Client", "Clock", "ConfigError", "ConflictError",
    "CorruptChunk", "CutOrder", "Event", "EventTooLarge", "InvalidInput", "InvalidName", "InvalidStreamCut",
    "ManualClock", "NotFound", "RetentionKind", "RetentionPolicy", "StreamConfig", "StreamCut", "StreamSealed",
    "SystemClock", "TidekeepError", "TruncatedData", "connect", "init_workspace",
]
