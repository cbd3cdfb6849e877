"""The audit chain benchmark (benchmarks/bench_audit_chain.py) runs end to end at a tiny size: the
appends with and without the chain, a trail of N rows that verifies whole, and both ratios
reported. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_audit_chain.py"


def test_the_audit_chain_benchmark_runs_at_a_tiny_size() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--rows", "7000", "--appends", "30", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert (figures["rows"], figures["appends"]) == (7000, 30)
    for name in ("append_s", "append_baseline_s", "verify_s", "read_s", "append_ratio", "verify_ratio"):
        assert figures[name] > 0, name
