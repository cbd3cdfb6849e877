"""Worker 2's isolation (tests/helpers/cluster.py): an empty tmpfs over the hidden directories,
with the code it runs mounted back when it lives under one of them — a checkout under /tmp, as a
CI runner may clone into, must not vanish from the worker (it did: `spark-class: not found`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.cluster import isolation_script, kept_directories


def test_only_the_outermost_covered_directories_are_kept() -> None:
    hidden = ["/tmp", "/work/base"]
    needed = ["/tmp/ci/.venv", "/tmp/ci", "/tmp/ci/src", "/usr/lib/python3", "/work/base/x", "/work/basement"]
    assert kept_directories(hidden, needed) == ["/tmp/ci", "/work/base/x"]


def test_the_worker_sees_its_code_and_nothing_else_of_the_hidden_directory(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    (hidden / "checkout" / "src").mkdir(parents=True)
    (hidden / "checkout" / "src" / "code.py").write_text("x = 1\n")
    (hidden / "workspace").mkdir()
    (hidden / "workspace" / "metadata.db").write_text("driver's\n")
    kept = kept_directories([str(hidden)], [str(hidden / "checkout"), "/usr"])
    script = isolation_script([str(hidden)], kept).replace("mkdir -p /tmp/tidekeep-isolated-worker && ", "")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "worker",
                           "sh", "-c", f"ls -A {hidden}; cat {hidden}/checkout/src/code.py"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["checkout", "x = 1"]
    assert (hidden / "workspace" / "metadata.db").exists()  # outside the namespace nothing changed
