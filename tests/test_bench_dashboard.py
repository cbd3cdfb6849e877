"""The dashboard benchmark (benchmarks/bench_dashboard.py) runs end to end at a tiny size: both
workspaces are built, every page is either measured (with the server's own time) or reported
missing, pages that follow a `rel="next"` link get a path when the first page has one, the store
queries are timed with their SQLite query plans, and the table and the JSON agree. No timing is
asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_dashboard.py"
PAGES = {"overview", "streams", "streams filtered", "streams sorted", "streams page 2", "stream", "reader groups",
         "catalog", "records", "records rare feed", "records page 2", "records deep", "record", "archives", "holds",
         "audit", "audit rare action"}
API = {"api streams", "api streams page 2", "api records deep", "api records UNLOCKED deep", "api records rare feed",
       "api audit", "api audit rare action"}


def test_the_dashboard_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--streams", "150", "--records", "2000", "--audit", "3000",
                           "--small-streams", "110", "--small-records", "300", "--repeat", "3", "--query-repeat", "2",
                           "--json", str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    for label, (streams, records, audit) in {"large": (150, 2000, 3000), "small": (110, 300, 10)}.items():
        side = figures[label]
        assert (side["streams"], side["records"], side["audit"]) == (streams, records, audit)
        assert set(side["pages"]) == PAGES | API
        # the API's lists are on main: every one answers (over 100 streams: page 2 of the streams exists at both sizes)
        assert all(side["pages"][name]["status"] == 200 for name in API), side["pages"]
        # the overview is on main: it is measured
        overview = side["pages"]["overview"]
        assert overview["status"] == 200 and not overview["missing"] and overview["samples"] == 3
        assert 0 < overview["p50_ms"] <= overview["p95_ms"] <= overview["p99_ms"]
        for name, row in side["pages"].items():
            if row["missing"]:
                assert row["status"] in (404, None), (name, row)
            else:
                assert row["status"] == 200 and row["samples"] >= 3 and row["bytes"] > 0, (name, row)
                assert row["first_ms"] > 0, (name, row)
        # a page reached through a next link has a path exactly when its first page has a next link
        if side["pages"]["streams"]["missing"]:
            assert side["pages"]["streams page 2"]["path"] is None
        for row in side["queries"].values():
            assert row["samples"] == 2 and 0 < row["p50_ms"] <= row["max_ms"]
            assert all(s["plan"] for s in row["statements"])
        assert any("catalog_records" in s["sql"] for s in side["queries"]["records deep page"]["statements"])
    assert figures["page_ratios"]["overview"] is not None
    assert set(figures["query_ratios"]) == set(figures["large"]["queries"])
    assert "large/small" in done.stdout and "overview" in done.stdout
