"""What a source file imports, read with ast, for tests of the package's layering."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tidekeep"


def imported_modules(path: Path) -> list[str]:
    """The modules `path` (a file under src/tidekeep) imports, absolute and dotted, relative imports
    resolved; `from . import x` names `x` as a module too. Imports under TYPE_CHECKING count."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[:len(parts) - node.level + 1]
                if node.module:
                    found.append(".".join([*base, node.module]))
                else:
                    found.append(".".join(base))
                    found += [".".join([*base, alias.name]) for alias in node.names]
            else:
                found.append(node.module or "")
    return found
