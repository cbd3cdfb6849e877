"""The metadata password by reference (spark/credentials.py): split off a URL, put back from a file
or an environment variable where the store is opened, and the driver's choice of reference for a
Spark master — a private file on a local master, the deployment's variable on a cluster, and a
refusal (never the password) when there is neither."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from tidekeep.errors import ConfigError, InvalidInput
from tidekeep.spark.credentials import (
    PASSWORD_ENV,
    MetadataReference,
    deployed_reference,
    metadata_reference,
    password_refusal,
    reference_from_options,
    split_password,
)

SECRET = "Pw-c18-SECRET"
URL = f"postgresql+psycopg://tk:{SECRET}@db.example:5432/tidekeep?options=-csearch_path%3Dx"

_words = st.text("abcdefghXYZ0123456789_", min_size=1, max_size=10)


@given(user=_words, password=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=16),
       host=_words, database=_words, in_query=st.booleans(),
       query=st.dictionaries(st.sampled_from(["sslmode", "options", "application_name"]), _words, max_size=2))
def test_split_takes_exactly_the_password_out(user: str, password: str, host: str, database: str, in_query: bool,
                                              query: dict[str, str]) -> None:
    base = sa.engine.URL.create("postgresql+psycopg", user, None, host, 5432, database, query)
    url = base.update_query_dict({"password": password}) if in_query else base.set(password=password)
    public, found = split_password(url.render_as_string(hide_password=False))
    assert found == password
    parsed = sa.make_url(public)
    assert parsed.password is None and "password" not in parsed.query
    assert (parsed.username, parsed.host, parsed.port, parsed.database, dict(parsed.query)) == \
        (user, host, 5432, database, query)


@pytest.mark.parametrize("url", ["sqlite:////tmp/a@b/metadata.db", "postgresql://tk@h/db", "not a url at all"])
def test_a_url_without_a_password_is_left_as_it_is(url: str) -> None:
    assert split_password(url) == (url, None)
    assert metadata_reference(url, "spark://elsewhere:7077") == MetadataReference(url)


def test_a_local_master_gets_a_private_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    reference = metadata_reference(URL, "local[2]")
    assert reference.password_env is None and reference.password_file is not None
    assert SECRET not in repr(reference.options())
    assert Path(reference.password_file).read_text(encoding="utf-8") == SECRET
    assert stat.S_IMODE(os.stat(reference.password_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(Path(reference.password_file).parent).st_mode) == 0o700
    assert sa.make_url(reference.url()) == sa.make_url(URL)
    assert metadata_reference(URL, "local[*]") == reference  # one file per password


@pytest.mark.parametrize("master", ["local[2]", "spark://m:7077", "k8s://https://api:6443", "yarn"])
def test_the_deployments_variable_is_the_reference_on_any_master(monkeypatch: pytest.MonkeyPatch,
                                                                 master: str) -> None:
    monkeypatch.setenv(PASSWORD_ENV, SECRET)
    reference = metadata_reference(URL, master)
    assert reference.options() == {"metadata_url": "postgresql+psycopg://tk@db.example:5432/tidekeep?"
                                                   "options=-csearch_path%3Dx", "metadata_password_env": PASSWORD_ENV}
    assert sa.make_url(reference.url()) == sa.make_url(URL)
    monkeypatch.delenv(PASSWORD_ENV)  # an executor the deployment forgot
    with pytest.raises(ConfigError, match=f"environment variable {PASSWORD_ENV} is not set") as raised:
        reference.url()
    assert SECRET not in str(raised.value)


@pytest.mark.parametrize("driver_value", [None, "another password"])
def test_a_cluster_master_without_the_variable_is_refused_without_showing_the_password(
        monkeypatch: pytest.MonkeyPatch, driver_value: str | None) -> None:
    if driver_value is None:
        monkeypatch.delenv(PASSWORD_ENV, raising=False)
    else:
        monkeypatch.setenv(PASSWORD_ENV, driver_value)
    with pytest.raises(ConfigError, match=f"set the environment variable {PASSWORD_ENV}") as raised:
        metadata_reference(URL, "spark://m:7077")
    assert SECRET not in str(raised.value)


def test_an_unreadable_password_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match="cannot read the metadata password file") as raised:
        MetadataReference("postgresql://tk@h/db", password_file=str(missing)).url()
    assert str(missing) in str(raised.value)
    given_file = tmp_path / "pw"
    given_file.write_text(SECRET + "\n", encoding="utf-8")  # a mounted secret may end in a newline
    assert sa.make_url(MetadataReference("postgresql://tk@h/db", password_file=str(given_file)).url()).password == \
        SECRET


@pytest.mark.parametrize(("options", "message"), [
    ({"metadata_url": URL}, "holds a password"),
    ({"metadata_url": "postgresql://tk@h/db?password=x"}, "holds a password"),
    ({"metadata_password_file": "/run/secrets/pg"}, "needs the option 'metadata_url'"),
    ({"metadata_url": "postgresql://tk@h/db", "metadata_password_file": "/f", "metadata_password_env": "V"},
     "give one of them"),
])
def test_options_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as raised:
        reference_from_options(options)
    assert SECRET not in str(raised.value)


def test_options_accepted() -> None:
    assert reference_from_options({}) is None
    assert reference_from_options({"metadata_url": "postgresql://tk@h/db", "metadata_password_env": "PG"}) == \
        MetadataReference("postgresql://tk@h/db", password_env="PG")


@pytest.mark.parametrize(("url", "master", "env", "refused"), [
    (URL, "spark://m:7077", {}, True),
    (URL, "spark://m:7077", {PASSWORD_ENV: "other"}, True),
    (URL, "sc://m:15002", {PASSWORD_ENV: SECRET}, False),
    (URL, "local[4]", {}, False),
    (URL, "local-cluster[2,1,1024]", {}, False),
    ("postgresql://tk@h/db", "yarn", {}, False),
    ("sqlite:////tmp/m.db", "yarn", {}, False),
])
def test_password_refusal(url: str, master: str, env: dict[str, str], refused: bool) -> None:
    reason = password_refusal(url, master, env)
    assert (reason is not None) == refused
    if reason is not None:
        assert reason.startswith("metadata.url") and PASSWORD_ENV in reason and SECRET not in reason


def test_a_spark_worker_makes_no_password_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    assert deployed_reference("postgresql://tk@h/db", "x") == MetadataReference("postgresql://tk@h/db")
    with pytest.raises(InvalidInput, match=f"x cannot pass the password.*{PASSWORD_ENV}") as raised:
        deployed_reference(URL, "x")
    assert SECRET not in str(raised.value)
    monkeypatch.setenv(PASSWORD_ENV, SECRET)
    assert deployed_reference(URL, "x").password_env == PASSWORD_ENV


_MAKE_FILE_AND_DIE = """
import os, signal, sys
from tidekeep.spark.credentials import metadata_reference
print(metadata_reference(sys.argv[1], "local[2]").password_file, flush=True)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
sys.stdin.read()
"""


def _driver(tmp_dir: Path, how: str) -> tuple[subprocess.Popen[str], Path]:
    """A driver process making its private password file in `tmp_dir`; `kill`: it is then killed
    outright (no atexit runs), `live`: it waits on stdin."""
    env = {**os.environ, "TMPDIR": str(tmp_dir)}
    env.pop(PASSWORD_ENV, None)
    process = subprocess.Popen([sys.executable, "-c", _MAKE_FILE_AND_DIE, URL, how], env=env, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def test_a_killed_drivers_password_file_is_removed_by_the_next_driver(tmp_path: Path) -> None:
    killed, killed_file = _driver(tmp_path, "kill")
    assert killed.wait(timeout=60) == -signal.SIGKILL
    assert killed_file.read_text(encoding="utf-8") == SECRET  # nothing could remove it when it died
    live, live_file = _driver(tmp_path, "live")
    try:
        following, _ = _driver(tmp_path, "kill")
        following.wait(timeout=60)
        assert not killed_file.parent.exists()  # the dead driver's directory is gone
        assert live_file.read_text(encoding="utf-8") == SECRET  # a running driver's file is left alone
    finally:
        assert live.stdin is not None
        live.stdin.close()
        live.wait(timeout=60)
    assert not live_file.parent.exists()  # removed at a normal exit
    other = tmp_path / "tidekeep-secret-notapid"
    other.mkdir()
    _driver(tmp_path, "kill")[0].wait(timeout=60)
    assert other.exists()  # not a directory of the naming this module uses: not ours to remove


def test_a_locked_directory_is_kept_even_when_its_pid_looks_gone(tmp_path: Path) -> None:
    """A driver in another pid namespace (a container sharing /tmp) has an id this one cannot see:
    its lock, not its id, says it is alive."""
    import fcntl

    from tidekeep.spark.credentials import remove_dead_drivers_files

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    locked, unlocked = tmp_path / f"tidekeep-secret-{gone.stdout.strip()}-held", \
        tmp_path / f"tidekeep-secret-{gone.stdout.strip()}-free"
    locked.mkdir(mode=0o700)
    unlocked.mkdir(mode=0o700)
    (unlocked / "metadata-password-0").write_text(SECRET)
    (tmp_path / "tidekeep-secret-1-link").symlink_to(locked)
    holder = os.open(locked, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_SH)
        assert remove_dead_drivers_files(str(tmp_path)) == [str(unlocked)]
        assert locked.exists() and not unlocked.exists() and (tmp_path / "tidekeep-secret-1-link").is_symlink()
    finally:
        os.close(holder)
