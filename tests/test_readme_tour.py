"""The README's five-minute tour runs as written: its commands in order, in a fresh workspace, every
one succeeding, and the reader-group step reads events."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOUR_HOME = "/tmp/tk-tour"


def tour_script() -> str:
    """The first ```sh block after the tour's heading."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme[readme.index("## A five-minute tour"):]
    match = re.search(r"```sh\n(.*?)```", tour, re.S)
    assert match is not None
    return match.group(1)


def test_the_tour_says_how_to_put_tidekeep_on_the_path_before_its_first_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme[readme.index("## A five-minute tour"):]
    assert tour.index('export PATH="$PWD/.venv/bin:$PATH"') < tour.index("```sh")


def test_the_readme_tour_runs_in_order_and_its_reader_group_reads_events(tmp_path: Path) -> None:
    script = tour_script()
    assert script.count(TOUR_HOME) == 1  # the workspace is the one line this test moves
    script = script.replace(TOUR_HOME, str(tmp_path / "tour"))
    # the caller's settings stay out; `tidekeep` is the one installed next to this Python (.venv/bin)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    lines = script.splitlines(keepends=True)
    # each command prints a marker first, so the reader group's output can be picked out
    marked = "".join(f"echo {shlex.quote('@@ ' + line.strip())}\n{line}" if line.startswith("tidekeep ") else line
                     for line in lines)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", marked], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "error:" not in done.stderr, done.stderr
    outputs = {block.split("\n", 1)[0]: block.split("\n", 1)[1] for block in done.stdout.split("@@ ")[1:]}
    read = next(out for command, out in outputs.items() if command.startswith("tidekeep rg read analytics"))
    events = read.splitlines()
    assert len(events) == 5 and all(re.fullmatch(r"sensor-\d,reading (10\d\d|1100)", e) for e in events), read
    truncated = next(out for command, out in outputs.items() if command.startswith("tidekeep audit list"))
    assert "truncate" in truncated and "iot/sensors" in truncated
    watermark = next(out for command, out in outputs.items() if command.startswith("tidekeep watermark compute"))
    assert watermark.startswith("appended watermark 0 of iot/sensors"), watermark
