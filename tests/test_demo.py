"""`make demo` as a test: examples/demo.sh runs to the end in a temporary directory, as a subprocess with
the `tidekeep` installed next to this Python, and says what it promises. Its steps take explicit times
(no sleeps, no windows of seconds between commands), so a loaded machine only makes it slower."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(1800)  # a loaded 2-core machine: the demo takes ~3 minutes idle, many times that shared
def test_the_demo_runs_to_the_end_and_says_what_it_promises(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
    env.update(TIDEKEEP_DEMO_BIN=str(Path(sys.executable).parent), TMPDIR=str(tmp_path))
    started = time.monotonic()
    done = subprocess.run(["bash", str(ROOT / "examples" / "demo.sh")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1800, check=False)
    elapsed = time.monotonic() - started
    print(f"demo: {elapsed:.0f} s, exit code {done.returncode}")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    out = done.stdout
    assert "Traceback" not in out + done.stderr
    assert f'export PATH="{Path(sys.executable).parent}:$PATH"' in out  # how to run its commands by hand
    for promise in [
        "events left to read: 500 (expected 500)",
        "spark.read.format('tidekeep') on demo/sensors: 500 events (client.read: 500)",
        "retention run: exit code 10; stream truncate: exit code 10 (expected 10 and 10)",
        "datasets with archives left: audit web (expected: audit web)",
        "==> Done: streams, size retention, legal holds",
    ]:
        assert promise in out, promise
    assert out.count("exit code: 6") == 1
    assert "Spark Structured Streaming:" not in out  # that is `make demo-full`
    assert list(tmp_path.glob("tidekeep-demo.*")) == []  # its workspace is removed
