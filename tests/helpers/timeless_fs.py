"""A store that gives no modification times: real local files behind a pyarrow filesystem whose
listings leave `mtime` out, as some stores (and some fsspec filesystems) do. For the rule that a
file of unknown age is never taken for an old one (docs/storage.md)."""

from __future__ import annotations

from typing import Any

import pyarrow.fs as pafs


def _timeless(info: pafs.FileInfo) -> pafs.FileInfo:
    return pafs.FileInfo(info.path, info.type, size=info.size)  # no mtime


class TimelessLocalHandler(pafs.FileSystemHandler):
    """Delegates every call to pyarrow's LocalFileSystem; file infos come back without mtime."""

    def __init__(self) -> None:
        self.local = pafs.LocalFileSystem()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimelessLocalHandler)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return "timeless-local"

    def normalize_path(self, path: str) -> str:
        return str(self.local.normalize_path(path))

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [_timeless(i) for i in self.local.get_file_info(paths)]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return [_timeless(i) for i in self.local.get_file_info(selector)]

    def create_dir(self, path: str, recursive: bool) -> None:
        self.local.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.local.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError("never the whole filesystem")

    def delete_file(self, path: str) -> None:
        self.local.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.local.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.local.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        return self.local.open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        return self.local.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        return self.local.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        return self.local.open_append_stream(path, metadata=metadata)


def timeless_local_filesystem() -> pafs.FileSystem:
    return pafs.PyFileSystem(TimelessLocalHandler())
