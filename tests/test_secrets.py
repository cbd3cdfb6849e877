"""Secrets never shown (docs/configuration.md "Secrets"): the password of the metadata URL, and the
credentials a storage URI may carry, appear in no output, no error, no log line at any level and
no Spark configuration or event log."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from helpers.cli import run_cli
from tidekeep.config import load_settings
from tidekeep.errors import ConfigError, StoreUnavailable
from tidekeep.redaction import redact

WRONG = "Pw-p6-SECRET"  # a password no server accepts: commands with it fail
WORKLOAD = Path(__file__).parent / "helpers" / "private_workload.py"


# ---- the pure core ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("postgresql+psycopg://tk:S3cr%40t@h:5432/db?options=-csearch_path%3Dx",
     "postgresql+psycopg://tk:***@h:5432/db?options=-csearch_path%3Dx"),
    ("postgresql://tk:p@ss@h/db", "postgresql://tk:***@h/db"),
    ("postgresql://tk@h/db?sslmode=require&password=abc", "postgresql://tk@h/db?sslmode=require&password=***"),
    ("host=h password=xyz dbname=d", "host=h password=*** dbname=d"),
    ("s3://AKIA:se/cret@bucket/p?region=x&secret_key=qq&session_token=tt",
     "s3://AKIA:***@bucket/p?region=x&secret_key=***&session_token=***"),
    ("error: 'postgres ql://u:pw@h/db' is not a database URL",
     "error: 'postgres ql://u:***@h/db' is not a database URL"),
    # nothing secret: unchanged
    ("sqlite:////tmp/a@b/metadata.db", "sqlite:////tmp/a@b/metadata.db"),
    ("postgresql://user@host/db", "postgresql://user@host/db"),
    ("deleted 3 records of feed a@b: 10 bytes", "deleted 3 records of feed a@b: 10 bytes"),
])
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected  # idempotent


@given(scheme=st.sampled_from(["postgresql", "postgresql+psycopg", "s3", "gs", "hdfs"]),
       user=st.text("abcdefgh_", min_size=0, max_size=8),
       password=st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!$%*-_.~@:", min_size=1, max_size=20),
       host=st.text("abcdefgh.-", min_size=1, max_size=12), path=st.text("abcdefgh/_", max_size=12),
       prefix=st.sampled_from(["", "error: cannot open ", "'", "url="]))
def test_a_url_password_is_always_masked_and_nothing_else(scheme: str, user: str, password: str, host: str,
                                                          path: str, prefix: str) -> None:
    text = f"{prefix}{scheme}://{user}:{password}@{host}/{path} and more"
    assert redact(text) == f"{prefix}{scheme}://{user}:***@{host}/{path} and more"


# ---- errors and logs -------------------------------------------------------------------------------
def test_typed_errors_never_show_a_password() -> None:
    assert str(ConfigError(f"bad value for 'storage.uri': 's3://k:{WRONG}@b/x': no")) == \
        "bad value for 'storage.uri': 's3://k:***@b/x': no"
    assert WRONG not in str(StoreUnavailable(f"cannot reach postgresql://u:{WRONG}@h/db\nsecond line"))


@pytest.fixture
def restore_logging() -> Iterator[None]:
    logger = logging.getLogger("tidekeep")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.mark.usefixtures("restore_logging")
@pytest.mark.parametrize("which", ["cli", "serve-text", "serve-json"])
def test_log_lines_at_every_level_never_show_a_password(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        which: str) -> None:
    from tidekeep.cli.context import configure_logging
    from tidekeep.service.server import configure_service_logging

    if which == "cli":
        configure_logging(load_settings(tmp_path, {"log.level": "DEBUG"}, env={}), verbose=True)
    else:
        configure_service_logging("DEBUG", json_logs=which == "serve-json")
    log = logging.getLogger("tidekeep.test")
    url = f"postgresql+psycopg://tk:{WRONG}@db/tidekeep?sslpassword={WRONG}"
    log.debug("connecting to %s", url)
    log.info("storage %s", f"s3://AK:{WRONG}@bucket/x")
    log.warning("retrying", extra={"fields": {"url": url}})
    try:
        raise RuntimeError(f"cannot open {url}")
    except RuntimeError:
        log.exception("failed")
    err = capsys.readouterr().err
    assert "connecting to postgresql+psycopg://tk:***@db/tidekeep?sslpassword=***" in err
    if which == "serve-json":  # one document a record; the service's JSON logs leave tracebacks out
        assert [json.loads(line)["level"] for line in err.splitlines()] == ["DEBUG", "INFO", "WARNING", "ERROR"]
        assert json.loads(err.splitlines()[2])["url"] == "postgresql+psycopg://tk:***@db/tidekeep?sslpassword=***"
    else:
        assert "RuntimeError: cannot open postgresql+psycopg://tk:***@db/tidekeep" in err  # the traceback too
    assert WRONG not in err


# ---- the CLI ---------------------------------------------------------------------------------------
def outputs(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


DEBUG = ("-v", "--set", "log.level=DEBUG")


@pytest.mark.parametrize("url", [
    f"postgresql+psycopg://tidekeep:{WRONG}@127.0.0.1:5432/tidekeep_test",
    f"postgresql+psycopg://tidekeep@127.0.0.1:5432/tidekeep_test?password={WRONG}",
    f"postgresql+psycopg://tidekeep:{WRONG}@127.0.0.1:notaport/tidekeep_test",
    f"mysql://tidekeep:{WRONG}@127.0.0.1/tidekeep_test",
])
@pytest.mark.parametrize("command", [["init"], ["init", "--json"], ["stream", "list"], ["db", "upgrade", "--json"],
                                     ["catalog", "run"], ["config", "show"]])
def test_failing_commands_never_show_the_metadata_password(tmp_path: Path, url: str, command: list[str]) -> None:
    done = run_cli(tmp_path / "ws", *DEBUG, "--metadata-url", url, *command)
    assert WRONG not in outputs(done), outputs(done)
    if command != ["config", "show"]:
        assert done.returncode != 0 and done.stderr.startswith("error: ")


@pytest.mark.parametrize("command", [["init"], ["init", "--json"], ["config", "show", "--json"]])
def test_storage_credentials_are_never_shown(tmp_path: Path, command: list[str]) -> None:
    # credentials in storage.uri are refused (they come from the AWS chain): the refusal names the
    # setting and the part that carries them, and shows neither the secret nor the access key
    storage = f"s3://AKIAEXAMPLE:{WRONG}@bucket/tk?endpoint_override=127.0.0.1:1&scheme=http"
    done = run_cli(tmp_path / "ws", *DEBUG, "--storage", storage, *command)
    assert WRONG not in outputs(done) and "AKIAEXAMPLE" not in outputs(done), outputs(done)
    assert done.returncode != 0
    assert done.stderr.startswith("error: bad value for 'storage.uri' in flags: it carries credentials "
                                  "(a password in its user part)")


def with_query_password(url: str) -> str:
    """The same URL with its password as a query parameter, which SQLAlchemy's hide_password misses."""
    parsed = sa.make_url(url)
    return parsed.set(password=None).update_query_dict({"password": parsed.password}).render_as_string(
        hide_password=False)


def leaks(text: str, password: str) -> list[str]:
    """The ways a real password shows: in a URL's user info or as a parameter."""
    return [shape for shape in (f":{password}@", f"password={password}", f'"password": "{password}"')
            if shape in text]


@pytest.mark.parametrize("form", ["user-info", "query"])
def test_working_commands_never_show_the_real_password(tmp_path: Path, pg_url: str, form: str) -> None:
    password = sa.make_url(pg_url).password
    assert password
    url = pg_url if form == "user-info" else with_query_password(pg_url)
    home = tmp_path / "ws"
    env = {"TIDEKEEP_METADATA_URL": url}
    for command in (["init"], ["init", "--json"], ["db", "upgrade", "--json"], ["stream", "create", "s/x"],
                    ["stream", "list", "--json"], ["config", "show"], ["config", "show", "--json"],
                    ["catalog", "list", "--json"]):
        done = run_cli(home, *DEBUG, *command, env=env)
        assert done.returncode == 0, outputs(done)
        assert leaks(outputs(done), password) == [], (command, outputs(done))
    shown = json.loads(run_cli(home, "init", "--json", env=env).stdout)["metadata_url"]
    assert shown.startswith("postgresql+psycopg://tidekeep") and "***" in shown


@pytest.mark.spark
@pytest.mark.parametrize("reference", ["file", "env"])
def test_spark_jobs_keep_the_password_out_of_logs_configuration_and_event_logs(tmp_path: Path, pg_url: str,
                                                                             reference: str) -> None:
    """Stream writes, a catalog import and job, an archive ingest and search and a Spark sink write
    on PostgreSQL, logging at DEBUG, with Spark's event log on: the password is in none of it. The
    executors read it from the driver's private file, or (`env`) from TIDEKEEP_METADATA_PASSWORD as a
    cluster deployment sets it on every node (docs/security.md)."""
    password = sa.make_url(pg_url).password
    assert password
    events = tmp_path / "events"
    events.mkdir()
    by_env = {"TIDEKEEP_METADATA_PASSWORD": password} if reference == "env" else {}
    env = {**os.environ, **by_env, "PYTHONPATH": os.pathsep.join(sys.path),
           "PYSPARK_SUBMIT_ARGS": f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir={events.as_uri()} "
                                  "--conf spark.eventLog.compress=false pyspark-shell"}
    done = subprocess.run([sys.executable, str(WORKLOAD), "022", str(tmp_path / "ws"), str(tmp_path / "work"),
                           "--metadata-url", pg_url, *DEBUG], capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    logged = [p for p in events.rglob("*") if p.is_file()]
    text = "\n".join(p.read_text(errors="replace") for p in logged)
    # the event log holds the Spark configuration, the jobs and their plans (the catalog job's slice
    # tasks, a Python function over a range of slice numbers)
    assert "SparkListenerEnvironmentUpdate" in text and "MapInArrow" in text and "AppendData" in text
    assert '"spark.redaction.regex"' in text
    assert leaks(text, password) == []
    assert leaks(outputs(done), password) == []
    assert "INFO tidekeep." in done.stderr  # verbose logging was on (at DEBUG: every record passes)
