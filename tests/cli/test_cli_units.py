"""One convention for units in the CLI: KB = 1000 B and KiB = 1024 B; a configured size prints in
the unit it was written in (the largest unit dividing it), byte counts in tables are human-readable
with the exact number in `--json`, and CLP's minute settings also take durations with units.

The CLI runs in a subprocess against a real SQLite workspace in tmp_path.
"""

from __future__ import annotations

import json
from pathlib import Path

import tidekeep as tk
from helpers.cli import run_cli


def ok(home: Path, *args: str) -> str:
    done = run_cli(home, *args)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def test_a_decimal_policy_prints_in_decimal_units_and_exactly(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    ok(home, "init")
    ok(home, "stream", "create", "u/s")
    assert ok(home, "stream", "policy", "u/s", "--size", "1KB:2KB") == \
        "u/s: retention by size: keep at least 1 KB and at most 2 KB\n"
    described = json.loads(ok(home, "stream", "describe", "u/s", "--json"))
    assert described["retention"] == "by size: keep at least 1 KB and at most 2 KB"
    assert json.loads(ok(home, "stream", "policy", "u/s", "--size", "1KB:2KB", "--json"))["retention"] == \
        {"kind": "size", "min": 1000, "max": 2000}
    assert "keep at least 1 KiB and at most 1536 MiB" in ok(home, "stream", "policy", "u/s", "--size", "1KiB:1.5GiB")

    # the retention decision compares amounts in the same exact form as its policy
    ok(home, "stream", "policy", "u/s", "--size", "1KB:2KB")
    with tk.connect(home) as client, client.stream("u/s").writer("w") as writer:
        for _ in range(30):
            writer.write(b"x" * 92, "k")  # 30 events of 8 + 92 logical bytes: 3000 B
    preview = ok(home, "retention", "preview", "u/s")
    assert "policy        by size: keep at least 1 KB and at most 2 KB" in preview
    assert "stream holds  3 KB" in preview
    assert "KiB" not in preview


def test_byte_counts_in_tables_are_human_readable_and_exact_in_json(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    ok(home, "init")
    record = {"feed": "A", "type": "Events", "create_time": "2024-01-01T00:00:00Z", "file_size": 123_456_789}
    ok(home, "catalog", "add", json.dumps(record))
    table = ok(home, "catalog", "list").splitlines()
    assert table[0].split()[5:7] == ["FILE", "SIZE"]
    assert table[1].split()[5:7] == ["117.7", "MiB"]
    assert json.loads(ok(home, "catalog", "list", "--json"))[0]["file_size"] == 123_456_789

    ok(home, "stream", "create", "u/s")
    with tk.connect(home) as client, client.stream("u/s").writer("w") as writer:
        for _ in range(40):
            writer.write(b"y" * 92, "k")  # 4000 logical bytes
    tail = ok(home, "stream", "tail", "u/s").strip()
    ok(home, "stream", "truncate", "u/s", tail)
    history = ok(home, "retention", "history", "u/s").splitlines()
    assert history[0].split()[:2] == ["TIME", "FREED"]
    assert history[1].split()[1:3] == ["3.9", "KiB"]
    assert json.loads(ok(home, "retention", "history", "u/s", "--json"))[0]["bytes_freed"] == 4000


def test_clp_minute_settings_take_durations_with_units(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    ok(home, "init")
    with_unit = json.loads(ok(home, "--set", "archive_output.retention_period=30d", "--set",
                              "results_cache.retention_period=2h", "archives", "gc", "--dry-run", "--json"))
    assert with_unit["archives"]["retention_minutes"] == 43200
    assert with_unit["archives"]["expiry_ms"] == with_unit["archives"]["now_ms"] - 30 * 86_400_000
    plain = json.loads(ok(home, "--set", "archive_output.retention_period=90", "archives", "gc", "--dry-run",
                          "--json"))
    assert plain["archives"]["retention_minutes"] == 90  # a plain number stays minutes
    refused = run_cli(home, "--set", "archive_output.retention_period=90s", "archives", "gc", "--dry-run")
    assert refused.returncode != 0 and refused.stdout == ""
    assert refused.stderr.startswith("error: ") and "not a whole number of minutes" in refused.stderr
