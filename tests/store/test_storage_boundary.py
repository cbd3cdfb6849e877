"""Only the storage interface touches storage (store/fileio.py, docs/workspace.md "Storage"): no
other module of src/tidekeep imports pyarrow.fs, calls a pyarrow filesystem's methods, passes
`filesystem=` to pyarrow, asks a FileIO for full paths or its filesystem, or joins a storage root
with a path. Read from the source itself, so a new module that reaches past the interface fails
here before it ships."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tidekeep"
INTERFACE = SRC / "store" / "fileio.py"

# pyarrow filesystem API (and the FileIO internals) that only the interface may use
FILESYSTEM_NAMES = frozenset({
    "FileSelector", "FileSystem", "FileType", "LocalFileSystem", "S3FileSystem", "create_dir", "from_uri",
    "get_file_info", "open_append_stream", "open_input_file", "open_input_stream", "open_output_stream",
    "full_path", "_fs",
})


def _is_root(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "root") or (isinstance(node, ast.Name)
                                                                         and node.id == "root")


def violations(source: str) -> list[str]:
    """What in one module's source reaches past the storage interface, one line per finding."""
    found = []
    for node in ast.walk(ast.parse(source)):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if a.name.startswith("pyarrow.fs")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.startswith("pyarrow.fs") or (module == "pyarrow" and any(a.name == "fs" for a in node.names)):
                found.append(f"{where}: from {module} import ...")
        elif isinstance(node, ast.Attribute) and node.attr in FILESYSTEM_NAMES:
            found.append(f"{where}: .{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg == "filesystem":
            found.append(f"{where}: filesystem=")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" \
                and node.args and _is_root(node.args[0]):
            found.append(f"{where}: a path joined to a root")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _is_root(node.left):
            found.append(f"{where}: a path added to a root")
        elif isinstance(node, ast.JoinedStr):
            parts = node.values
            for before, after in itertools.pairwise(parts):
                if (isinstance(before, ast.FormattedValue) and _is_root(before.value)
                        and isinstance(after, ast.Constant) and str(after.value).startswith("/")):
                    found.append(f"{where}: f-string path under a root")
    return found


def test_nothing_outside_the_interface_touches_storage_directly() -> None:
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        if path == INTERFACE:
            continue
        found = violations(path.read_text(encoding="utf-8"))
        if found:
            offenders[str(path.relative_to(SRC))] = found
    assert offenders == {}


def test_the_check_sees_each_way_past_the_interface() -> None:
    assert violations("import pyarrow.fs as pafs") == ["line 1: import pyarrow.fs"]
    assert violations("from pyarrow import fs") == ["line 1: from pyarrow import ..."]
    assert violations("fs.get_file_info(p)") == ["line 1: .get_file_info"]
    assert violations("pq.read_table(p, filesystem=fs)") == ["line 1: filesystem="]
    assert violations("client.storage.full_path(key)") == ["line 1: .full_path"]
    assert violations("posixpath.join(storage.root, key)") == ["line 1: a path joined to a root"]
    assert violations("storage.root + '/' + key") == ["line 1: a path added to a root"]
    assert violations("f'{root}/{key}'") == ["line 1: f-string path under a root"]
    # what stays allowed: keys joined to keys, a root shown in a message, pyarrow itself
    assert violations("posixpath.join(task.results_dir, name)\nf'storage {storage.root}: missing'\n"
                      "import pyarrow.parquet as pq") == []
