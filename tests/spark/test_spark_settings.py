"""Spark settings: `spark.conf` reaches the sessions tidekeep starts, refused confs change nothing,
and the Spark UI (`spark.ui`) is on a loopback address with its URL on the stderr of long commands,
never when off; the conf decision (spark_conf.py) against its oracle."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.config import load_settings
from tidekeep.errors import ConfigError, InvalidInput
from tidekeep.spark.session import get_spark
from tidekeep.spark_conf import parse_spark_conf

UI_LINE = re.compile(r"^Spark UI: http://127\.0\.0\.1:(\d+)$", re.MULTILINE)
CONF = "{spark.driver.memory: 700m, spark.sql.shuffle.partitions: 3, spark.tidekeep.probe: true}"


def spark_env(**extra: str) -> dict[str, str]:
    """This environment without the suite's Spark UI switch (conftest.py) and tidekeep settings."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYSPARK_SUBMIT_ARGS", "SPARK_LOCAL_IP"}
           and (not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_"))}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    env.update(extra)
    return env


def tidekeep_cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tidekeep.cli.main", "--home", str(home), *args],
                          capture_output=True, text=True, env=spark_env(**env), timeout=300, check=False)


# ---- the session --------------------------------------------------------------------------------

SESSION_PROBE = textwrap.dedent("""
    import json, subprocess, sys, urllib.request
    import tidekeep as tk
    client = tk.connect(sys.argv[1], create=True, settings={"spark.master": "local[1]", "spark.conf": sys.argv[2]})
    spark = client.spark()
    sc = spark.sparkContext
    listening = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    url = sc.uiWebUrl
    port = url.rsplit(":", 1)[1] if url else None
    status = urllib.request.urlopen(url + "/jobs/", timeout=30).status if url else None
    print(json.dumps({
        "conf": {k: spark.conf.get(k) for k in ("spark.driver.memory", "spark.sql.shuffle.partitions",
                                                "spark.tidekeep.probe", "spark.sql.session.timeZone")},
        "ui": url, "status": status,
        "ui_addresses": sorted({line.split()[3].rsplit(":", 1)[0] for line in listening.splitlines()
                                if port and line.split()[3].endswith(":" + port)})}))
    spark.stop()
""")


@pytest.mark.spark
def test_spark_conf_reaches_the_session_and_the_ui_listens_on_loopback(tmp_path: Path) -> None:
    """The `spark.conf` values are the session's (overriding tidekeep's default shuffle partitions,
    never its UTC time zone), and the UI, on by default, answers on 127.0.0.1 and listens nowhere else."""
    done = subprocess.run([sys.executable, "-c", SESSION_PROBE, str(tmp_path / "ws"), CONF], capture_output=True,
                          text=True, env=spark_env(), timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["conf"] == {"spark.driver.memory": "700m", "spark.sql.shuffle.partitions": "3",
                            "spark.tidekeep.probe": "true", "spark.sql.session.timeZone": "UTC"}
    assert seen["ui"] is not None and UI_LINE.fullmatch(f"Spark UI: {seen['ui']}"), seen
    assert seen["status"] == 200
    assert seen["ui_addresses"] and all(address.strip("[]").endswith("127.0.0.1")
                                        for address in seen["ui_addresses"]), seen


# ---- the URL line --------------------------------------------------------------------------------

@pytest.mark.spark
def test_a_long_command_prints_the_ui_url_on_stderr_and_only_when_on(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    log = tmp_path / "app.log"
    log.write_text("2024-07-01 12:00:00,000 INFO start\n2024-07-01 12:00:01,500 ERROR failed\n", encoding="utf-8")
    assert tidekeep_cli(home, "init").returncode == 0
    on = tidekeep_cli(home, "--set", "spark.master=local[1]", "archives", "ingest", "web", str(log), "--json")
    assert on.returncode == 0, on.stderr
    assert json.loads(on.stdout)["messages"] == 2  # stdout stays one JSON document
    assert len(UI_LINE.findall(on.stderr)) == 1 and on.stderr.count("Spark UI") == 1, on.stderr
    off = tidekeep_cli(home, "--set", "spark.master=local[1]", "--set", "spark.ui=false", "archives", "ingest", "web",
                       str(log))
    assert off.returncode == 0, off.stderr
    assert "Spark UI" not in off.stderr + off.stdout
    by_env = tidekeep_cli(home, "--set", "spark.master=local[1]", "archives", "ingest", "web", str(log),
                          TIDEKEEP_SPARK_UI="no")
    assert by_env.returncode == 0 and "Spark UI" not in by_env.stderr + by_env.stdout, by_env.stderr


# ---- refusals ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("conf", "named"), [
    ("{spark.master: 'local[4]'}", "'spark.master' is tidekeep's own: set spark.master instead"),
    ("{spark.sql.session.timeZone: Europe/Paris}", "'spark.sql.session.timeZone' is tidekeep's own"),
    ("{spark.ui.enabled: false}", "'spark.ui.enabled' is tidekeep's own: set spark.ui instead"),
    ("{driver.memory: 4g}", "'driver.memory' is not a Spark conf key"),
    ("{spark.executorEnv.TIDEKEEP_METADATA_PASSWORD: hunter2}", "'spark.executorEnv.TIDEKEEP_METADATA_PASSWORD' "
                                                                "would carry a secret"),
    ("{spark.hadoop.fs.s3a.secret.key: hunter2}", "'spark.hadoop.fs.s3a.secret.key' would carry a secret"),
    ("{spark.eventLog.dir: 's3://AKIA:hunter2@bucket/events'}", "the value of 'spark.eventLog.dir' carries"),
    ("{spark.jars: [a.jar, b.jar]}", "the value of 'spark.jars' must be"),
    ("[spark.driver.memory]", "expected a mapping of Spark confs"),
])
def test_a_refused_conf_is_named_and_changes_nothing(tmp_path: Path, conf: str, named: str) -> None:
    """In tidekeep.yaml, the environment or a flag: one error line naming the key and its layer, exit
    code 2, no secret echoed, and the workspace is not created."""
    home = tmp_path / "ws"
    home.mkdir()
    (home / "tidekeep.yaml").write_text(f"spark:\n  conf: {conf}\n", encoding="utf-8")
    for where, args, env in ((str(home / "tidekeep.yaml"), (), {}),
                             ("environment variable TIDEKEEP_SPARK_CONF", (), {"TIDEKEEP_SPARK_CONF": conf}),
                             ("flags", ("--set", f"spark.conf={conf}"), {})):
        if where != str(home / "tidekeep.yaml"):
            (home / "tidekeep.yaml").unlink(missing_ok=True)
        done = tidekeep_cli(home, *args, "init", **env)
        assert done.returncode == ConfigError.exit_code, done.stderr
        assert done.stderr.startswith(f"error: bad value for 'spark.conf' in {where}: ") and done.stderr.count(
            "\n") == 1, done.stderr
        assert named in done.stderr and "hunter2" not in done.stderr and done.stdout == ""
        assert sorted(p.name for p in home.iterdir()) == ([] if where != str(home / "tidekeep.yaml")
                                                          else ["tidekeep.yaml"])


def test_spark_conf_with_a_connect_server_is_refused_before_connecting(tmp_path: Path) -> None:
    """A Connect server takes its confs when it starts; refusing beats ignoring them silently. Port 9
    (discard) has no server: an attempt to connect would fail differently."""
    settings = load_settings(tmp_path, {"spark.remote": "sc://127.0.0.1:9", "spark.conf": CONF}, env={})
    with pytest.raises(ConfigError, match=r"^'spark.conf' applies to the Spark sessions tidekeep starts"):
        get_spark(settings)


def test_spark_conf_in_yaml_is_read_as_a_mapping(tmp_path: Path) -> None:
    """Including a Kubernetes conf that names a Secret: a reference, not the secret (docs/deployment.md)."""
    (tmp_path / "tidekeep.yaml").write_text(
        "spark:\n  ui: false\n  conf:\n    spark.driver.memory: 4g\n    spark.executor.cores: 2\n"
        "    spark.dynamicAllocation.enabled: true\n"
        "    spark.kubernetes.executor.secretKeyRef.TIDEKEEP_METADATA_PASSWORD: tidekeep-pg:password\n",
        encoding="utf-8")
    settings = load_settings(tmp_path, env={})
    assert settings["spark.ui"] is False
    assert settings["spark.conf"] == {
        "spark.driver.memory": "4g", "spark.dynamicAllocation.enabled": "true", "spark.executor.cores": "2",
        "spark.kubernetes.executor.secretKeyRef.TIDEKEEP_METADATA_PASSWORD": "tidekeep-pg:password"}
    assert tk.connect(tmp_path, create=True).settings["spark.conf"] == settings["spark.conf"]


# ---- the decision against an oracle ----------------------------------------------------------------

OWNED = {"spark.master", "spark.remote", "spark.api.mode", "spark.app.name", "spark.ui.enabled",
         "spark.ui.showConsoleProgress", "spark.sql.session.timeZone", "spark.driver.extraJavaOptions",
         "spark.executor.extraJavaOptions", "spark.redaction.regex", "spark.sql.redaction.string.regex"}
SECRET_PARTS = ("secret", "password", "passwd", "token", "accesskey", "access.key", "access_key", "credential")


REFERENCES = ("spark.kubernetes.driver.secretKeyRef.", "spark.kubernetes.executor.secretKeyRef.",
              "spark.kubernetes.driver.secrets.", "spark.kubernetes.executor.secrets.")


def oracle_refuses(key: str) -> bool:
    lowered = key.lower()
    if any(c.isspace() for c in key):
        return True
    if any(key.startswith(prefix) and key != prefix for prefix in REFERENCES):
        return False
    return (not key.startswith("spark.") or key == "spark." or key in OWNED
            or any(part in lowered for part in SECRET_PARTS))


KEY_PARTS = st.sampled_from(["spark", "driver", "memory", "executorEnv", "AWS_REGION", "AWS_SECRET_ACCESS_KEY",
                             "sql", "shuffle", "partitions", "password", "Token", "access", "key", "master", "ui",
                             "enabled", "hadoop", "fs", "s3a", "endpoint", "x y", ""])
KEYS = (st.lists(KEY_PARTS, min_size=1, max_size=5).map(".".join)
        | st.builds(str.__add__, st.sampled_from(REFERENCES), st.sampled_from(["", "TIDEKEEP_METADATA_PASSWORD",
                                                                                "aws-token", " x"]))
        | st.sampled_from(sorted(OWNED)) | st.text(max_size=12))
VALUES = st.one_of(st.booleans(), st.integers(), st.sampled_from(["4g", "  2 ", "a,b", "s3://bucket/x", ""]),
                   st.none())


@given(st.dictionaries(KEYS, VALUES, max_size=6))
def test_parse_spark_conf_matches_the_oracle(conf: dict[str, Any]) -> None:
    bad_key = next((key for key in conf if oracle_refuses(key)), None)
    bad_value = next((key for key, value in conf.items()
                      if value is None or (isinstance(value, str) and not value.strip())), None)
    if bad_key is None and bad_value is None:
        expected = {key: ("true" if value is True else "false" if value is False else str(value).strip())
                    for key, value in conf.items()}
        assert parse_spark_conf(conf) == dict(sorted(expected.items()))
        assert list(parse_spark_conf(conf)) == sorted(conf)
        return
    with pytest.raises(InvalidInput) as refused:
        parse_spark_conf(conf)
    first = next(key for key, value in conf.items() if key in {bad_key, bad_value})
    assert repr(first) in str(refused.value) and "\n" not in str(refused.value)


def test_config_show_lists_the_spark_confs(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    shown = tidekeep_cli(home, "--set", f"spark.conf={CONF}", "config", "show", "spark.conf", "spark.ui")
    assert shown.returncode == 0, shown.stderr
    lines = {line.split()[0]: line.split()[1:] for line in shown.stdout.splitlines() if line.startswith("spark.")}
    assert lines["spark.conf"] == ["spark.driver.memory=700m,", "spark.sql.shuffle.partitions=3,",
                                   "spark.tidekeep.probe=true", "flag", "(--set)"], shown.stdout
    assert lines["spark.ui"] == ["true", "default"], shown.stdout
    as_json = tidekeep_cli(home, "--set", f"spark.conf={CONF}", "config", "show", "spark.conf", "--json")
    assert json.loads(as_json.stdout)["settings"][0]["value"] == {
        "spark.driver.memory": "700m", "spark.sql.shuffle.partitions": "3", "spark.tidekeep.probe": "true"}


@pytest.mark.parametrize(("master", "env", "listens"), [
    ("local[2]", {}, True),  # put on 127.0.0.1 (_ui_address)
    ("local-cluster[2,1,1024]", {}, True),
    ("spark://master:7077", {}, False),  # Spark would listen on every interface, unauthenticated
    ("spark://master:7077", {"SPARK_LOCAL_IP": "  "}, False),
    ("spark://master:7077", {"SPARK_LOCAL_IP": "10.0.0.5"}, True),  # the address the user chose
    ("k8s://https://api:6443", {}, False),
    ("yarn", {"SPARK_LOCAL_IP": "0.0.0.0"}, True),
])
def test_the_ui_starts_with_a_cluster_master_only_on_an_address_the_user_chose(
        master: str, env: dict[str, str], listens: bool) -> None:
    from tidekeep.spark.session import ui_listens

    assert ui_listens(master, env) is listens
