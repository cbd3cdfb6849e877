"""Start-up time of the `tidekeep` command against `python -c pass`, measured in the same run.

    .venv/bin/python benchmarks/bench_cli.py [--runs N] [--events N] [--json FILE] [--before-src DIR]

Each command runs N times (default 15) in a fresh interpreter, the commands taking turns so that
load from other processes falls on all of them alike, with warm bytecode caches (kept in the run's
temporary directory, PYTHONPYCACHEPREFIX) as an installed package has them:

  python -c pass            the interpreter alone: the floor every command stands on
  tidekeep --help           builds the whole command tree and renders its help; no data
  tidekeep stream describe  opens the workspace (SQLite metadata, local storage) and describes a
                            4-segment stream holding --events events
  tidekeep stream list      opens the workspace and lists its streams

Reported per command: the median and the fastest wall-clock seconds, the median CPU seconds
(user + system of the child, steadier than wall clock on a busy machine), the ratio of the medians
to `python -c pass`, and the libraries the command imported. `--before-src DIR` also runs the three
tidekeep commands with another source tree first on PYTHONPATH (e.g. an older commit's `src`,
exported with `git archive`), rows marked "(before)", in the same turns. Goal on an idle 2-core machine:
`--help` <= 0.2 s and `stream describe` <= 0.4 s (docs/benchmarks.md, "CLI start-up"). Timing
never fails anything. The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOALS_S = {"tidekeep --help": 0.2, "tidekeep stream describe": 0.4}
HEAVY = ("pyspark", "pandas", "alembic", "pyarrow", "numpy", "sqlalchemy", "pydantic", "rich")

# runs the CLI as `python -m tidekeep.cli` does, then names the heavy libraries it loaded (stderr)
PROBE = """
import json, runpy, sys
sys.argv = ["tidekeep", *sys.argv[1:]]
try:
    runpy.run_module("tidekeep.cli", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
sys.stderr.write("\\nHEAVY " + json.dumps([m for m in HEAVY if m in sys.modules]) + "\\n")
""".replace("HEAVY if", f"{HEAVY!r} if")


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tidekeep.cli", *args]


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (user + system) of one run of `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode(errors='replace')}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(args: list[str], env: dict[str, str]) -> list[str]:
    if not args:
        return []
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True, check=False)
    return list(json.loads(done.stderr.rsplit("HEAVY ", 1)[1]))


def make_workspace(home: Path, events: int, env: dict[str, str]) -> None:
    subprocess.run(cli("init"), env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(cli("stream", "create", "bench/describe", "--segments", "4"), env=env, check=True,
                   stdout=subprocess.DEVNULL)
    lines = "".join(f'{{"sensor": "s{i % 300}", "value": {i}}}\n' for i in range(events))
    subprocess.run(cli("stream", "write", "bench/describe", "--key-json", "sensor"), input=lines.encode(), env=env,
                   check=True, stdout=subprocess.DEVNULL)


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="runs per command (default 15)")
    parser.add_argument("--events", type=int, default=10_000, help="events in the described stream")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    parser.add_argument("--before-src", type=Path, help="also run the commands with this source tree on PYTHONPATH")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tidekeep-bench-cli-") as tmp:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("TIDEKEEP_") and k != "PYTHONDONTWRITEBYTECODE"}
        # bytecode caches in a directory of this run, written by the warm-up below: an installed
        # package has them, and without them every run would compile tidekeep's sources again
        # (PYTHONDONTWRITEBYTECODE) or write into a source tree that may not be ours (--before-src)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        env["TIDEKEEP_HOME"] = str(Path(tmp) / "home")
        make_workspace(Path(env["TIDEKEEP_HOME"]), options.events, env)
        commands: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "tidekeep --help": cli("--help"),
            "tidekeep stream describe": cli("stream", "describe", "bench/describe"),
            "tidekeep stream list": cli("stream", "list"),
        }
        envs = dict.fromkeys(commands, env)
        if options.before_src is not None:
            before_env = dict(env, PYTHONPATH=str(options.before_src.resolve()))
            for name in list(commands)[1:]:
                commands[f"{name} (before)"] = commands[name]
                envs[f"{name} (before)"] = before_env
        for name, command in commands.items():  # warm the page cache and the bytecode caches
            timed(command, envs[name])
        load_before = load_average()
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for run in range(options.runs):
            print(f"run {run + 1}/{options.runs}", file=sys.stderr)
            for name, command in commands.items():
                wall, cpu = timed(command, envs[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
        load_after = load_average()
        imports = {name: heavy_imports(command[3:] if command[1] == "-m" else [], envs[name])
                   for name, command in commands.items()}

    floor = statistics.median(walls["python -c pass"])
    results: list[dict[str, Any]] = []
    print(f"{options.runs} runs per command, {os.cpu_count()} cores, Python {sys.version.split()[0]}; "
          f"load average before {load_before}, after {load_after}")
    print(f"{'command':<35} {'median s':>9} {'fastest s':>10} {'CPU s':>7} {'ratio':>7} {'goal':>6}  imports")
    for name in commands:
        median = statistics.median(walls[name])
        goal = GOALS_S.get(name)  # the "(before)" rows have none
        row = {"command": name, "median_s": round(median, 4), "fastest_s": round(min(walls[name]), 4),
               "cpu_median_s": round(statistics.median(cpus[name]), 4), "ratio_to_python": round(median / floor, 1),
               "goal_s": goal, "imports": imports[name]}
        results.append(row)
        print(f"{name:<35} {row['median_s']:>9.3f} {row['fastest_s']:>10.3f} {row['cpu_median_s']:>7.3f} "
              f"{row['ratio_to_python']:>6.1f}x {'' if goal is None else f'{goal:.1f}':>6}  "
              f"{', '.join(imports[name]) or '-'}")
    if options.json is not None:
        options.json.write_text(json.dumps({"runs": options.runs, "load_before": load_before,
                                            "load_after": load_after, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
