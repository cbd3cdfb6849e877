"""The HTTP API benchmark (benchmarks/bench_api.py) runs end to end at a tiny size: a real `tidekeep
api` process and the bare FastAPI one answer every request, the baseline answers a document of the
describe response's size, the RSS is read after the asked number of requests, and the retention
preview is measured or skipped with its reason. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_api.py"


def test_the_api_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--streams", "3", "--events", "50", "--clients", "2",
                           "--seconds", "0.5", "--warmup", "0.1", "--rss-requests", "400", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    measured = figures["results"]
    assert {"describe", "list", "bare"} <= set(measured)
    for row in measured.values():
        assert row["requests"] > 0 and row["errors"] == 0
        assert 0 < row["p50_ms"] <= row["p99_ms"]
    assert figures["bare_bytes"] == figures["describe_bytes"] > 0
    # the preview route is measured when the server has it, else skipped with the reason
    assert ("preview" in measured) != ("preview" in figures["skipped"])
    assert figures["rss_after_requests"] >= 400 and figures["rss_kib_after"] > 0
    assert "describe p99 / bare p99" in done.stdout
