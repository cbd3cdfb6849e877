"""The storage interface: every file tidekeep reads, writes, lists, moves or deletes goes through a
`FileIO` (docs/workspace.md, "Storage").

A FileIO is one storage root on one pyarrow filesystem (a local directory, or any URI pyarrow
opens). Callers name files by *keys*: POSIX paths relative to the root (`streams/s/x-1/0.0/a.parquet`),
never full paths. Only this module touches pyarrow.fs objects and joins keys to the root, so
putting another store behind the interface changes this module alone.

Contracts every method keeps:

- **Durability** (`storage.fsync`): with fsync on and a local root, a file written through `write`,
  `write_parquet` or `create`/`finish` is on disk, its data and the directory entries leading to it,
  when the call returns (store/durable.py); a `move` makes the new name durable. Object stores need
  nothing: a completed upload is durable. Local files and directories are owner-only
  (store/private.py), fsync on or off.
- **Ownership of deletions**: `delete`, `delete_dir` and `remove_file` delete only under a root
  proven to belong to this workspace (`workspace_id` set once the workspace stamps matched,
  store/workspace.py); otherwise they raise WorkspaceMismatch and delete nothing. `discard` and
  `discard_dir` are for files this process has just written itself (a writer's uncommitted chunks, a
  task's staging directory) and need no proof. A root opened with `outside` (a location a user named,
  such as a catalog data root or a Spark checkpoint) is not the workspace's: its deletions are
  permitted by the caller's own rules.
- **Deletion never raises for a file**: a missing file is no failure (gone is gone); any other
  OSError leaves the file, named with its reason in the DeleteOutcome (store/deletion.py).
- **Atomic replacement**: `write_atomic` writes under a temporary name (`<key>.<random>.partial`)
  and renames it into place, so a reader sees no file or the whole one. The rename is atomic on a
  local filesystem; on an object store a move is a copy and a delete, but an upload only becomes
  visible whole, so readers still never see a partial object.

Local-only assumptions, each confined to this module: fsync and owner-only modes apply to local
roots only; directories exist only on filesystems that have them (on an object store `list` shows
no directory entries, no directory is ever created — pyarrow would write an empty marker object per
level on every write — and `delete_dir` removes the objects under the prefix); `move` is a rename
only on local roots. A URI carrying credentials is refused (tidekeep/uri_credentials.py), and an
object store's bucket must exist (`require_bucket`). docs/storage.md tells the whole story.
"""

from __future__ import annotations

import builtins
import logging
import os
import posixpath
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..errors import ConfigError, WorkspaceMismatch
from ..uri_credentials import CREDENTIALS_CHAIN, credentials_in_uri
from .deletion import DeleteOutcome, FileLeft, failure_reason
from .durable import forget_directory, make_directories, sync_directory_entries
from .local_dirs import check_can_be_directory, read_only_as_typed
from .private import create_private_file, make_private_directories

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

log = logging.getLogger("tidekeep.storage")

PARTIAL_SUFFIX = ".partial"  # a file being written by write_atomic: <key>.<random>.partial
# pyarrow filesystems that are object stores: flat key spaces with no directories, no rename and
# no directory times (the module docstring, "Object stores")
OBJECT_STORE_TYPES = frozenset({"s3", "gcs"})


@dataclass(frozen=True)
class StoredFile:
    """A file in storage: its key, modification time (ms; None when the store gives none, so the
    file's age is unknown — never 0, which would make it look decades old) and size."""

    path: str
    mtime_ms: int | None
    size: int


@dataclass(frozen=True)
class StoredEntry:
    """A file or directory in storage; `mtime_ms` None when the store has none."""

    path: str
    mtime_ms: int | None
    size: int
    is_dir: bool


def _open_filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    import pyarrow.fs as pafs

    fs, root = pafs.FileSystem.from_uri(with_delayed_open(uri))
    return fs, root


def with_delayed_open(uri: str) -> str:
    """An s3:// URI with pyarrow's `allow_delayed_open` on (unless the URI sets it): an output stream
    then starts no multipart upload when opened, and a file smaller than one part — every chunk
    file — is a single PUT instead of three requests (initiate, upload the part, complete). Errors
    are still raised, when the file is written or closed, before any metadata names it."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != "s3" or any(name == "allow_delayed_open" for name, _ in parse_qsl(parts.query)):
        return uri
    return urlunsplit(parts._replace(query=f"{parts.query}&allow_delayed_open=true" if parts.query
                                     else "allow_delayed_open=true"))


def _is_local_filesystem(fs: pafs.FileSystem) -> bool:
    import pyarrow.fs as pafs

    return isinstance(fs, pafs.LocalFileSystem)


def _is_object_store(fs: pafs.FileSystem) -> bool:
    return fs.type_name in OBJECT_STORE_TYPES


def _normal_root(root: str) -> str:
    stripped = root.rstrip("/")
    return stripped if stripped or not root.startswith("/") else "/"


class FileIO:
    """One storage root; see the module docstring for the contracts. `uri` is a pyarrow URI or a
    local path (a relative one resolved against the working directory); a URI pyarrow cannot open
    is a ConfigError naming 'storage.uri'. `filesystem`: a pyarrow filesystem no URI reaches (a
    `pyarrow.fs.PyFileSystem` over another store); `uri` is then the root's path inside it, and
    only this process can open it (`location` names the path, not the filesystem)."""

    def __init__(self, uri: str, *, fsync: bool = True, filesystem: pafs.FileSystem | None = None) -> None:
        if filesystem is not None:
            self._init(filesystem, uri, uri, fsync)
            return
        if "://" not in uri:  # a local path: pyarrow's filesystem waits for the first call that needs it
            try:
                root = str(Path(uri).resolve())
            except OSError as exc:
                raise ConfigError(f"bad value for 'storage.uri': {uri!r}: {exc}") from None
            self._init(None, root, uri, fsync)
            return
        import pyarrow as pa

        carried = credentials_in_uri(uri)
        if carried is not None:  # the URI is not shown: it holds the secret
            raise ConfigError(f"bad value for 'storage.uri': it carries credentials ({carried}); {CREDENTIALS_CHAIN}")
        try:
            fs, root = _open_filesystem(uri)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            raise ConfigError(f"bad value for 'storage.uri': {uri!r}: {exc}") from None
        self._init(fs, root, uri, fsync)

    def _init(self, fs: pafs.FileSystem | None, root: str, uri: str, fsync: bool) -> None:
        # None: a local root whose pyarrow filesystem is created on first use (`_fs`)
        self._opened_fs = fs
        self.uri = uri
        self.root = _normal_root(root)  # the root inside its filesystem: for messages
        self.fsync = fsync  # as configured; `durable` says whether it applies here
        self.is_local = fs is None or _is_local_filesystem(fs)
        self.is_object_store = fs is not None and _is_object_store(fs)
        self.durable = fsync and self.is_local
        self.workspace_id: str | None = None
        self._foreign = False

    @property
    def _fs(self) -> pafs.FileSystem:
        if self._opened_fs is None:
            import pyarrow.fs as pafs

            self._opened_fs = pafs.LocalFileSystem()
        return self._opened_fs

    @classmethod
    def outside(cls, uri: str) -> FileIO:
        """A root a user named that is not the workspace's storage (a catalog data root, a Spark
        checkpoint): what may be deleted there is the caller's rules' decision, not a workspace
        stamp's. Nothing there is written durably on our behalf. A URI pyarrow cannot open raises
        pyarrow's own error (an ArrowException or OSError) for the caller to report."""
        fs, root = _open_filesystem(uri) if "://" in uri else (None, str(Path(uri).resolve()))
        opened = cls.__new__(cls)
        opened._init(fs, root, uri, fsync=False)
        opened._foreign = True
        return opened

    # ---- keys ---------------------------------------------------------------------------------
    def full_path(self, key: str) -> str:
        """The path of `key` inside the root's filesystem. For this module, tests and diagnostics:
        everything else passes keys."""
        if not key:
            return self.root
        return posixpath.join(self.root, key) if self.root else key

    def uri_of(self, key: str) -> str:
        """A URI other readers (Spark's, pyarrow's on executors) open `key` by. The key goes into
        the URI's path, before its query: `s3://b/p?region=r` names `s3://b/p/<key>?region=r`, not
        a region ending in the key."""
        if "://" in self.uri:
            parts = urlsplit(self.uri)
            return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + key))
        return "file://" + self.full_path(key)

    def resolved_local_path(self, key: str) -> str:
        """On a local root, the path of `key` on this machine with every link resolved: one name
        per file, however it was reached (how inputs are named and told apart, store/inputs.py).
        ValueError on any other root."""
        if not self.is_local:
            raise ValueError(f"storage root {self.uri} is not on this machine")
        return os.path.realpath(self.full_path(key))

    def location(self) -> str:
        """What opens this root again from any process: the URI, or the resolved local path."""
        return self.uri if "://" in self.uri else self.root

    def _key_of(self, path: str) -> str:
        if not self.root:
            return path
        return posixpath.relpath(path, self.root)

    # ---- the root -----------------------------------------------------------------------------
    def create_root(self, setting: str = "'storage.uri'") -> None:
        """Create the root if missing (durably with fsync: every new directory's entry is synced).
        A local root under a file is a ConfigError naming `setting`; a parent that cannot be
        written is ReadOnlyWorkspace. On an object store there is nothing to create, but the bucket
        must exist (`require_bucket`)."""
        if self.is_object_store:
            self.require_bucket(setting)
            return
        if self.is_local:
            check_can_be_directory(Path(self.root), setting)
        with read_only_as_typed(Path(self.root)):
            if self.durable:
                make_directories(self.root)
            else:
                self._make_directories(self.root)

    def require_bucket(self, setting: str = "'storage.uri'") -> None:
        """On an object store, the root's bucket must exist: a ConfigError naming `setting` when it
        does not. tidekeep never creates a bucket (its region, policies and lifecycle rules are the
        operator's choice)."""
        if not self.is_object_store:
            return
        import pyarrow.fs as pafs

        bucket = self.root.split("/", 1)[0]
        try:
            found = self._fs.get_file_info(bucket).type == pafs.FileType.Directory
        except OSError as exc:
            raise ConfigError(f"bad value for {setting}: bucket {bucket!r} cannot be reached: "
                              f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        if not found:
            raise ConfigError(f"bad value for {setting}: bucket {bucket!r} does not exist; create it first "
                              "(tidekeep never creates buckets)")

    def is_dir(self, key: str = "") -> bool:
        path = self.full_path(key) if key else self.root
        if self._opened_fs is None:  # a local root (opening a workspace asks this; see `_fs`)
            return os.path.isdir(path)
        import pyarrow.fs as pafs

        return bool(self._fs.get_file_info(path).type == pafs.FileType.Directory)

    # ---- reading ------------------------------------------------------------------------------
    def exists(self, key: str) -> bool:
        import pyarrow.fs as pafs

        return bool(self._fs.get_file_info(self.full_path(key)).type != pafs.FileType.NotFound)

    def size(self, key: str) -> int:
        """The size of the file at `key`; FileNotFoundError when there is none."""
        import pyarrow.fs as pafs

        info = self._fs.get_file_info(self.full_path(key))
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"no file {key} in storage {self.root}")
        return int(info.size or 0)

    def read(self, key: str) -> bytes:
        """The whole file; FileNotFoundError (or another OSError, or pyarrow's ArrowException, see
        `is_read_failure`) when it cannot be read."""
        if self._opened_fs is None:  # a local root (opening a workspace reads its stamp; see `_fs`)
            with open(self.full_path(key), "rb") as handle:
                return handle.read()
        with self._fs.open_input_stream(self.full_path(key)) as handle:
            return bytes(handle.read())

    def open_input(self, key: str) -> Any:
        """A random-access file handle (a context manager), e.g. for pq.ParquetFile. The key ""
        is the root itself, for a root that is one file (an input named by its own URI)."""
        return self._fs.open_input_file(self.full_path(key))

    def open_stream(self, key: str) -> Any:
        """A sequential read stream of the file at `key` (a context manager with `read(n)`): for
        reading a file front to back, which on an object store is one streamed GET. The key "" is
        the root itself, as for `open_input`. The bytes as stored: pyarrow would otherwise decompress
        by the name's extension, and a caller tells compression apart by the content."""
        return self._fs.open_input_stream(self.full_path(key), compression=None)

    def entry(self, key: str = "") -> StoredEntry | None:
        """The file or directory at `key` (the key "": the root itself), None when nothing is
        there. On an object store a prefix with objects under it is a directory."""
        import pyarrow.fs as pafs

        info = self._fs.get_file_info(self.full_path(key))
        if info.type not in (pafs.FileType.File, pafs.FileType.Directory):
            return None
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else None
        return StoredEntry(key, mtime, int(info.size or 0), info.type == pafs.FileType.Directory)

    @staticmethod
    def is_read_failure(exc: BaseException) -> bool:
        """Whether `exc` is how `read` reports a file it cannot read: an OSError, or an error of
        pyarrow's (checked without importing pyarrow: a read that never loaded it cannot raise one)."""
        arrow = sys.modules.get("pyarrow")
        return isinstance(exc, OSError) or (arrow is not None and isinstance(exc, arrow.ArrowException))

    def read_parquet(self, key: str, columns: builtins.list[str] | None = None) -> pa.Table:
        """The Parquet file at `key` (only `columns`, when given). The file is opened first and
        the reader given the handle: handed a path, pyarrow's dataset discovery asks an object
        store about it twice more (three HEADs and two GETs a small file, not one HEAD and two).
        The handle is read by a ParquetFile, not `pq.read_table`: one file needs none of the
        dataset machinery, which costs about a third of reading a chunk of a few MB."""
        import pyarrow.parquet as pq

        with self._fs.open_input_file(self.full_path(key)) as handle:
            return pq.ParquetFile(handle).read(columns=columns)

    def parquet_scan(self, keys: builtins.list[str], schema: pa.Schema) -> Callable[[], pa.Table]:
        """A prepared read of the Parquet files at `keys` as one table of `schema`'s columns (a
        file's other columns are left out), rows in the order of `keys`. Preparing it is cheap and
        touches no file; the returned call reads every file in one pass through pyarrow, without
        the interpreter lock, so on another thread it runs beside a busy Python thread instead of
        waiting for the lock between files. An unreadable file fails the whole call (pyarrow's
        error); `read_parquet` tells one file's error from another's. The files are read one after
        another on the calling thread (parallelism is the caller's: several scans at once). Local
        files are read through a buffered stream, which costs about a third less CPU than pyarrow's
        pre-buffering; an object store keeps pre-buffering, which merges a file's range requests."""
        import pyarrow.dataset as ds

        options = ds.ParquetFragmentScanOptions(pre_buffer=self.is_object_store,
                                                use_buffered_stream=not self.is_object_store)
        dataset = ds.FileSystemDataset.from_paths(
            [self.full_path(key) for key in keys], schema=schema,
            format=ds.ParquetFileFormat(default_fragment_scan_options=options), filesystem=self._fs)
        return dataset.scanner(use_threads=False).to_table

    def list(self, prefix: str, recursive: bool = True) -> builtins.list[StoredEntry]:
        """The files and directories under the directory `prefix` (none when it does not exist)."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.full_path(prefix), recursive=recursive, allow_not_found=True)
        entries = []
        for info in self._fs.get_file_info(selector):
            if info.type not in (pafs.FileType.File, pafs.FileType.Directory):
                continue
            mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else None
            entries.append(StoredEntry(self._key_of(info.path), mtime, int(info.size or 0),
                                       info.type == pafs.FileType.Directory))
        return entries

    def list_files(self, prefix: str, recursive: bool = True) -> builtins.list[StoredFile]:
        """The files under the directory `prefix` (none when it does not exist)."""
        return [StoredFile(e.path, e.mtime_ms, e.size) for e in self.list(prefix, recursive) if not e.is_dir]

    # ---- writing ------------------------------------------------------------------------------
    def create(self, key: str) -> Any:
        """A new file at `key` (its directories created), written through the returned stream and
        finished with `finish` (or `finish_data` when it is renamed next)."""
        full = self.full_path(key)
        self._make_directories(posixpath.dirname(full))
        if self.is_local:
            create_private_file(full)  # the open below truncates it and keeps its mode
        if self.durable:
            import pyarrow as pa

            return pa.OSFile(full, "wb")  # a real file descriptor, to fsync
        return self._fs.open_output_stream(full)

    def finish(self, sink: Any, key: str) -> None:
        """Close a file from `create`; when durable, it and its directory entries are on disk on return."""
        self.finish_data(sink)
        if self.durable:
            sync_directory_entries(posixpath.dirname(self.full_path(key)), self.root)

    def finish_data(self, sink: Any) -> None:
        """Close a file from `create`, its data on disk when durable but not its name: for a file
        that is moved next (`move` makes the new name durable)."""
        if not self.durable:
            sink.close()
            return
        try:
            os.fsync(sink.fileno())
        finally:
            sink.close()

    def write(self, key: str, data: bytes) -> None:
        """Write a whole file (replacing one at `key`), durably when fsync is on."""
        sink = self.create(key)
        try:
            sink.write(data)
        except BaseException:
            sink.close()
            raise
        self.finish(sink, key)

    def write_atomic(self, key: str, data: bytes) -> None:
        """Write a whole file under a temporary name and move it into place: a reader sees no file
        or all of it, never part (see the module docstring)."""
        temporary = f"{key}.{uuid.uuid4().hex}{PARTIAL_SUFFIX}"
        sink = self.create(temporary)
        try:
            sink.write(data)
        except BaseException:
            sink.close()
            raise
        self.finish_data(sink)
        self.move(temporary, key)

    def write_parquet(self, key: str, table: pa.Table, **options: Any) -> None:
        """Write `table` as one Parquet file (`options` as for `pq.write_table`)."""
        import pyarrow.parquet as pq

        if not self.durable:
            full = self.full_path(key)
            self._make_directories(posixpath.dirname(full))
            if self.is_local:
                create_private_file(full)
            pq.write_table(table, full, filesystem=self._fs, **options)
            return
        sink = self.create(key)
        try:
            pq.write_table(table, sink, **options)
        except BaseException:
            sink.close()
            raise
        self.finish(sink, key)

    def move(self, source: str, target: str, *, sync: bool = True) -> None:
        """Move a file (a rename on a local root; the target's directory is created if missing).
        With `sync` (and durable) the new name, and the way to it, is on disk on return; a caller
        moving many files into one directory passes False and calls `sync_names` once after. No file
        at `source` is FileNotFoundError on every store (pyarrow's S3 move says OSError, or nothing
        when source and target are one key)."""
        full_source, full_target = self.full_path(source), self.full_path(target)
        self._make_directories(posixpath.dirname(full_target))
        if self.is_object_store and full_source == full_target and not self._is_file(full_source):
            raise FileNotFoundError(f"no file {source} in storage {self.root} to move")
        try:
            self._fs.move(full_source, full_target)
        except FileNotFoundError:
            raise
        except OSError:
            if self.is_object_store and not self._is_file(full_source):
                raise FileNotFoundError(f"no file {source} in storage {self.root} to move") from None
            raise
        if sync:
            self.sync_names(posixpath.dirname(target))

    def _is_file(self, full: str) -> bool:
        import pyarrow.fs as pafs

        return bool(self._fs.get_file_info(full).type == pafs.FileType.File)

    def sync_names(self, directory: str) -> None:
        """Files were moved into `directory`: make their names durable (nothing unless durable)."""
        if self.durable:
            sync_directory_entries(self.full_path(directory) if directory else self.root, self.root)

    def _make_directories(self, directory: str) -> None:
        # owner-only on a local filesystem; the entry is made durable by the file written into it.
        # An object store has no directories: pyarrow would write an empty marker object per level,
        # costing requests on every chunk write and leaving objects that hold nothing
        if self.is_local:
            make_private_directories(directory)
        elif not self.is_object_store:
            self._fs.create_dir(directory, recursive=True)

    # ---- deleting -----------------------------------------------------------------------------
    def require_deletable(self) -> None:
        """Refuse to delete anything under a root not proven to belong to this workspace."""
        if self.workspace_id is None and not self._foreign:
            raise WorkspaceMismatch(
                f"refusing to delete files under storage root {self.uri}: it carries no workspace id, so nothing "
                "proves it belongs to this metadata store; run 'tidekeep init' to stamp the workspace")

    def delete(self, keys: Iterable[str]) -> DeleteOutcome:
        """Delete each file, going on past failures (never raised: callers delete after their
        metadata commit, which stands). Only in a root proven to be the workspace's."""
        self.require_deletable()
        return self.discard(keys)

    def discard(self, keys: Iterable[str]) -> DeleteOutcome:
        """`delete` for files this process wrote moments ago and knows to be unreferenced: no
        workspace proof needed, they are its own."""
        deleted = 0
        failed: builtins.list[FileLeft] = []
        for key in keys:
            try:
                self._fs.delete_file(self.full_path(key))
                deleted += 1
            except FileNotFoundError:
                pass
            except OSError as exc:
                failed.append(FileLeft(key, failure_reason(exc)))
        return DeleteOutcome(deleted, tuple(failed))

    def delete_dir(self, key: str) -> DeleteOutcome:
        """Delete a directory and everything in it: its files one by one (as `delete`, so every
        file that can go goes and the outcome names those that cannot), then the emptied tree. A
        directory that cannot be listed stands in the outcome for everything under it; an empty
        tree that cannot be removed is only logged, as it holds no data."""
        self.require_deletable()
        return self.discard_dir(key)

    def discard_dir(self, key: str) -> DeleteOutcome:
        """`delete_dir` for a directory this process filled itself (a task's staging directory)."""
        try:
            files = self.list_files(key)
        except OSError as exc:
            return DeleteOutcome(0, (FileLeft(key, failure_reason(exc)),))
        outcome = self.discard(f.path for f in files)
        if outcome.failed:
            return outcome  # the tree cannot go while files remain in it
        full = self.full_path(key)
        try:
            self._fs.delete_dir(full)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning(
                "directory %s holds no files but could not be removed (%s)", key, failure_reason(exc))
        if self.durable:
            forget_directory(full)  # its entry must be synced again if it is ever recreated
        return outcome

    def remove_file(self, key: str) -> int | None:
        """Delete the one file at `key` and return its size; None when nothing is there (removed
        meanwhile counts too). IsADirectoryError for anything but a file: a directory tree is never
        deleted on a single name's say-so. Other OSErrors are raised. Ownership as `delete`."""
        self.require_deletable()
        import pyarrow.fs as pafs

        full = self.full_path(key)
        info = self._fs.get_file_info(full)
        if info.type == pafs.FileType.NotFound:
            return None
        if info.type != pafs.FileType.File:
            raise IsADirectoryError(f"{key} is not a file")
        try:
            self._fs.delete_file(full)
        except FileNotFoundError:
            return None
        return max(int(info.size or 0), 0)


__all__ = ["PARTIAL_SUFFIX", "FileIO", "StoredEntry", "StoredFile"]
