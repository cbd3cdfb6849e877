"""The suite runs in parallel (pytest-xdist, docs/testing.md "In parallel"): every worker process gets
its own PostgreSQL schemas, temporary directories and Spark session. A probe module using the
suite's own fixtures runs on two workers, each running every probe (`--dist each`); what the
probes saw must not overlap between the workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent

PROBE = textwrap.dedent('''
    import json
    import os
    from pathlib import Path

    import pytest
    import sqlalchemy as sa

    def record(**seen):
        seen["worker"] = os.environ["PYTEST_XDIST_WORKER"]
        with open(os.environ["PROBE_OUT"], "a", encoding="utf-8") as out:
            out.write(json.dumps(seen) + "\\n")

    @pytest.mark.parametrize("n", range(3))
    def test_postgres_and_temp_dirs(n, pg_url, tmp_path):
        engine = sa.create_engine(pg_url)
        with engine.begin() as conn:
            schema = conn.execute(sa.text("select current_schema()")).scalar()
            conn.execute(sa.text("create table mine (worker text)"))  # fails if another test has the schema
        engine.dispose()
        (tmp_path / "mine").mkdir()  # fails if another test has the directory
        record(kind="pg", schema=schema, tmp=str(tmp_path))

    @pytest.mark.parametrize("n", range(3))
    def test_pooled_schemas(n, pg_head_url):
        engine = sa.create_engine(pg_head_url)
        with engine.begin() as conn:
            schema = conn.execute(sa.text("select current_schema()")).scalar()
            # fails on a schema another test left rows in, or that another worker is using
            conn.execute(sa.text("insert into scopes (name, created_ms) values ('probe', 0)"))
        engine.dispose()
        record(kind="pooled", schema=schema)

    def test_spark(spark):
        from pyspark import SparkFiles

        assert spark.range(3).count() == 3
        record(kind="spark", files=SparkFiles.getRootDirectory())
''')


def test_each_worker_has_its_own_schemas_temp_dirs_and_spark_session(tmp_path: Path) -> None:
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    (probe_dir / "test_probe.py").write_text(PROBE, encoding="utf-8")
    out = tmp_path / "seen.jsonl"
    env = {**os.environ, "PROBE_OUT": str(out),
           "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])}
    # the suite's conftest as a plugin: the same fixtures, on the suite's own terms
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-n", "2", "--dist", "each",
                           "-p", "no:cacheprovider", "--rootdir", str(probe_dir),
                           "--basetemp", str(tmp_path / "base"), str(probe_dir)],
                          env=env, cwd=probe_dir, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    workers = {s["worker"] for s in seen}
    assert workers == {"gw0", "gw1"}
    pg = [s for s in seen if s["kind"] == "pg"]
    assert len(pg) == 6  # three probes on each worker
    assert len({s["schema"] for s in pg}) == 6 and all(s["schema"].startswith("t_") for s in pg)
    assert len({s["tmp"] for s in pg}) == 6
    for worker in workers:  # each worker's temporary directories under a base of its own
        assert {Path(s["tmp"]).parent.name for s in pg if s["worker"] == worker} == {f"popen-{worker}"}
    pooled = [s for s in seen if s["kind"] == "pooled"]
    assert len(pooled) == 6 and not ({s["schema"] for s in pooled} & {s["schema"] for s in pg})
    for worker in workers:  # a worker reuses its pooled schema; no other worker ever gets it
        own = {s["schema"] for s in pooled if s["worker"] == worker}
        assert len(own) == 1 and not own & {s["schema"] for s in pooled if s["worker"] != worker}
    spark = {s["worker"]: s["files"] for s in seen if s["kind"] == "spark"}
    assert set(spark) == workers and len(set(spark.values())) == 2  # one session per worker
