"""Typed errors. Every error a user can cause is one of these, with a one-line message."""

from __future__ import annotations

from .redaction import redact


class TidekeepError(Exception):
    """Base of all tidekeep errors. `exit_code` is what the CLI exits with."""

    exit_code = 1

    def __str__(self) -> str:  # one line, always, and no password in it (a message may quote a URL setting)
        return redact(" ".join(str(self.args[0]).split())) if self.args else self.__class__.__name__


class InvalidInput(TidekeepError):
    """Bad input from the caller; nothing was changed."""

    exit_code = 2


class ConfigError(InvalidInput):
    """tidekeep.yaml, an environment variable or a flag is wrong; the message names the key."""


class InvalidName(InvalidInput):
    """A scope, stream, writer or reader group name that does not match [A-Za-z0-9_-]{1,255}."""


class InvalidStreamCut(InvalidInput):
    """A stream cut that is malformed, belongs elsewhere, or cannot be used for the operation."""


class EventTooLarge(InvalidInput):
    """An event above the 8 MiB limit."""


class InvalidRegex(InvalidInput):
    """A regular expression that is malformed, outside the supported subset, or needs syntax no
    linear-time (RE2) engine can run: backreferences, lookarounds, possessive quantifiers."""


class NotFound(TidekeepError):
    exit_code = 3


class AlreadyExists(TidekeepError):
    exit_code = 4


class StreamSealed(TidekeepError):
    """The stream (or the segment a write went to) is sealed and takes no more writes."""

    exit_code = 5


class TruncatedData(TidekeepError):
    """The requested position lies before the stream's head: the data has been truncated."""

    exit_code = 6


class ConflictError(TidekeepError):
    """A concurrent change won; retry with fresh state."""

    exit_code = 7


class StaleGeneration(ConflictError):
    """The reader group was reset (or re-created) since this handle loaded it: its update is refused."""


class StaleVersion(ConflictError):
    """An edit named the version it was based on (`If-Match`, `expected_version`) and the thing has
    changed since: nothing was changed. `current`: the version it has now."""

    def __init__(self, message: str, current: str) -> None:
        super().__init__(message, current)  # every field in args, so the error survives pickling
        self.current = current


class LeaseLost(ConflictError):
    """Work decided under a lease was about to be applied after another process took the lease over
    (or it was released): the transaction that would apply it is refused and changes nothing."""

    def __init__(self, message: str, resource: str, version: int, holder: str | None,
                 current_version: int | None) -> None:
        # every field in args, so the error survives pickling (a Spark task raises it on an executor)
        super().__init__(message, resource, version, holder, current_version)
        self.resource = resource
        self.version = version  # the version the work was decided under
        self.holder = holder  # who holds the lease now (None: released, or no lease row)
        self.current_version = current_version  # None: no lease row


class RunInProgress(ConflictError):
    """A catalog retention run or purge (`kind`) was refused because another run of that kind, not a
    dry run, holds its run lock (store/run_lock.py): nothing was changed. `run_id`: the running
    run's `catalog_runs` row, None when it has not written one yet."""

    def __init__(self, message: str, kind: str, run_id: int | None) -> None:
        super().__init__(message, kind, run_id)  # every field in args, so the error survives pickling
        self.kind = kind
        self.run_id = run_id


class ChunkError(TidekeepError):
    """A committed chunk file is missing or corrupt. Never silently skipped."""

    exit_code = 8

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class ChunkMissing(ChunkError):
    pass


class CorruptChunk(ChunkError):
    pass


class SchemaError(TidekeepError):
    """The metadata database is at a schema this version does not know."""

    exit_code = 9


class TransactionClosed(InvalidInput):
    """The transaction is committed or aborted: it takes no more writes, commits or pings."""


class TransactionExpired(TransactionClosed):
    """The transaction's lease ran out before it was committed; its staged events are discarded."""


class WriterFenced(TidekeepError):
    """A newer writer opened with the same writer id: this one may not commit any more. Its events
    that did not land stay with it (`Writer.unflushed()`), so nothing acknowledged is lost."""

    exit_code = 11


class StoreUnavailable(TidekeepError):
    """The metadata store could not be reached, or the connection was lost. When it happened during a
    commit, the commit may or may not have landed: writers and transactions find out before going on."""

    exit_code = 12


class WorkspaceMismatch(TidekeepError):
    """The metadata store and the storage root are not one workspace (their workspace ids differ or
    one has none), or a workspace from before the ids is asked to delete files: nothing is done."""

    exit_code = 13


class HoldActive(TidekeepError):
    """A legal hold protects the target: its data may not be deleted until the hold is removed."""

    exit_code = 10

    def __init__(self, message: str, hold_id: int, reason: str) -> None:
        super().__init__(message)
        self.hold_id = hold_id
        self.reason = reason


class StagedFileMissing(TidekeepError):
    """A file a Spark task reported writing is not in the storage the driver commits to, or not at
    the size the task wrote: the task wrote where the driver cannot see (a directory private to its
    worker). Raised before anything is committed; the message names the file, the task and the
    storage root. Distinct from ChunkMissing, which reports a committed chunk that was lost."""

    exit_code = 14

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class ReadOnlyWorkspace(TidekeepError):
    """A file or directory tidekeep must write to is read-only (its permissions, an immutable flag, a
    read-only filesystem): the message says "read-only" and names the path. Nothing was changed."""

    exit_code = 15

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class EnvironmentFailure(TidekeepError):
    """The operating system refused an operation for a reason that is not the input's fault (no space
    left on the device, an I/O error, too many open files): the message names the path when known."""

    exit_code = 16


class NotAuthenticated(TidekeepError):
    """The HTTP API was called without a valid token (none, unknown, malformed or revoked)."""

    exit_code = 17


class PermissionDenied(TidekeepError):
    """The token is valid but its role or its scope does not allow the operation: nothing was done."""

    exit_code = 18


class AuditTrailBroken(TidekeepError):
    """The audit trail's hash chain does not verify: a row was changed, deleted or inserted around
    tidekeep (`tidekeep audit verify` names the first), or its head is missing. Nothing audited is
    appended to a trail whose head is gone."""

    exit_code = 19


# Exit codes of the CLI that no TidekeepError carries (docs/cli.md, "Errors and exit codes").
INTERNAL_ERROR_EXIT = 70  # a defect in tidekeep: unexpected exception (sysexits.h EX_SOFTWARE)
INTERRUPTED_EXIT = 130  # Ctrl-C (SIGINT): 128 + the signal number, as shells report it
