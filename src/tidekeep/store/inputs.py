"""Input files of a Spark job (`archives ingest`, `catalog import`) named by URIs: listed on the
driver, opened and read by the executors, both through FileIO (docs/storage.md, "Inputs").

An input is a plain path, a file:// URI or any URI pyarrow opens (s3://bucket/prefix?endpoint_override=…,
gs://…, hdfs://…). One naming a file is that file; one naming a directory (on an object store, a
prefix with objects under it) stands for every file under it at any depth, in sorted order. A file
named twice (directly, or through two directories) is read once, where it first appears.

What the driver lists it hands the executors as `InputFile`s: where to open the file (a location
FileIO opens anywhere, and a key in it), never an open handle or a driver-only path — a local
input is turned into its absolute path, the same file on every executor that shares the driver's
filesystem (spark/cluster.py refuses the others). An input URI carrying credentials is refused as
`storage.uri` is (uri_credentials.py): credentials come from the store's own chain.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import InvalidInput, NotFound
from ..uri_credentials import CREDENTIALS_CHAIN, credentials_in_uri
from .fileio import FileIO


@dataclass(frozen=True)
class InputFile:
    """One input file: `location` and `key` open it through FileIO on any process (`open_stream`),
    `name` is how messages and archives name it (a local file's absolute path; a URI's file as
    scheme://bucket/key, without the URI's options), `size` its size in bytes when listed."""

    location: str
    key: str
    name: str
    size: int
    in_directory: bool = False  # found by listing a directory the input named


def given_inputs(inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    """The inputs as strings (one input alone is a list of one); InvalidInput when there are none."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    given = [os.fspath(i) for i in inputs]
    if not given:
        raise InvalidInput("no input paths given")
    for one in given:
        check_input_text(one)
    return given


def check_input_text(given: str) -> None:
    """InvalidInput for an input no file can have: empty (it would stand for the current
    directory), or with a NUL or a character UTF-8 cannot encode (the filesystem would raise)."""
    if not given:
        raise InvalidInput("an input path is empty: name a file, a directory or a URI")
    if "\x00" in given:
        raise InvalidInput(f"input {given!r} contains a NUL character")
    try:
        given.encode()
    except UnicodeEncodeError:
        raise InvalidInput(f"input {given!r} is not valid UTF-8 text") from None


def check_input_uri(given: str) -> None:
    """InvalidInput for an input URI that carries credentials (naming the part, never showing it)."""
    carried = credentials_in_uri(given)
    if carried is not None:
        raise InvalidInput(f"an input URI carries credentials ({carried}); {CREDENTIALS_CHAIN}")


def _open_root(given: str) -> FileIO:
    check_input_uri(given)
    if "://" not in given:
        return FileIO.outside(os.path.realpath(given))
    try:
        return FileIO.outside(given)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise InvalidInput(f"input {given!r} cannot be opened: {reason}") from None


def _name(given: str, root: FileIO, key: str) -> str:
    if root.is_local:  # a plain path or a file:// URI: the file's resolved path, one name for one file
        return root.resolved_local_path(key)
    parts = urlsplit(given)
    base = urlunsplit(parts._replace(query="", fragment="")).rstrip("/")
    return f"{base}/{key}" if key else base


def _listing_failure(given: str, exc: BaseException) -> InvalidInput:
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return InvalidInput(f"input {given!r} cannot be listed: {reason}")


def list_inputs(inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                keep: Callable[[str], bool] = lambda key: True) -> list[InputFile]:
    """The files the inputs stand for (the module docstring), in order; `keep` chooses among the
    files found under a directory by their key relative to it. NotFound for an input where
    nothing is; InvalidInput for one that cannot be opened or carries credentials."""
    files: list[InputFile] = []
    seen: set[str] = set()
    for given in given_inputs(inputs):
        root = _open_root(given)
        try:
            entry = root.entry("")
            found = _files_under(root, given, keep) if entry is not None and entry.is_dir else None
        except OSError as exc:
            raise _listing_failure(given, exc) from None
        if entry is None:
            raise NotFound(f"input path {given!r} does not exist")
        if found is None:
            name = _name(given, root, "")
            found = [InputFile(name if root.is_local else root.location(), "", name, entry.size)]
        for file in found:
            if file.name not in seen:
                seen.add(file.name)
                files.append(file)
    return files


def _files_under(root: FileIO, given: str, keep: Callable[[str], bool]) -> list[InputFile]:
    entries = sorted((f for f in root.list_files("") if keep(f.path)), key=lambda f: f.path)
    if root.is_local:  # each local file by its own resolved path: a link is read as its target
        resolved = [(_name(given, root, f.path), f.size) for f in entries]
        return [InputFile(path, "", path, size, True) for path, size in resolved]
    return [InputFile(root.location(), f.path, _name(given, root, f.path), f.size, True) for f in entries]


def visible(key: str) -> bool:
    """A key none of whose parts is hidden ('.name') or a marker ('_SUCCESS', '_temporary/...')."""
    return not any(part.startswith((".", "_")) for part in key.split("/"))


class InputOpener:
    """Opens InputFiles on an executor, one FileIO per location for the whole task."""

    def __init__(self) -> None:
        self._roots: dict[str, FileIO] = {}

    def root(self, file: InputFile) -> FileIO:
        root = self._roots.get(file.location)
        if root is None:
            root = self._roots[file.location] = FileIO.outside(file.location)
        return root

    def stream(self, file: InputFile) -> Any:
        """A sequential read stream of the file (a context manager)."""
        return self.root(file).open_stream(file.key)

    def random_access(self, file: InputFile) -> Any:
        """A random-access handle of the file (a context manager), e.g. for pq.ParquetFile."""
        return self.root(file).open_input(file.key)


def locations_of(given: Iterable[str]) -> list[str]:
    """The inputs as spark/cluster.py judges them: a local path made absolute, a URI as given."""
    return [g if "://" in g else os.path.realpath(g) for g in given]


__all__ = ["InputFile", "InputOpener", "check_input_uri", "given_inputs", "list_inputs", "locations_of", "visible"]
