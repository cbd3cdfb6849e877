"""An S3-protocol server on loopback for the tests: moto in server mode, one process per test
process (so the workers and CLI subprocesses a test starts reach it too), reached by pyarrow's own
S3 client over HTTP — the code path AWS takes.

Each test gets a bucket of its own (`new_bucket`); credentials come from the standard AWS
environment variables, as in production (docs/storage.md, "Object storage"). When the server cannot
start, S3 tests skip with the reason — except in CI (CI=true, or TIDEKEEP_TEST_REQUIRE_S3=1, which
`.ci/run` sets), where they fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REGION = "us-east-1"
# moto accepts any key pair; these are set in the environment, never written into a URI or tidekeep.yaml
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "tidekeep-test", "AWS_SECRET_ACCESS_KEY": "tidekeep-test-secret"}
START_TIMEOUT_S = 30.0
_LISTENING = re.compile(rb"Running on http://127\.0\.0\.1:(\d+)")


@dataclass(frozen=True)
class S3Server:
    """A running server: where it listens, and its request log (one line per HTTP request)."""

    port: int
    log: Path

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def uri(self, bucket: str, prefix: str = "") -> str:
        """The storage.uri of `bucket`/`prefix` on this server (no credentials: those are the environment's)."""
        path = f"{bucket}/{prefix}".rstrip("/")
        return f"s3://{path}?endpoint_override={self.endpoint}&scheme=http&region={REGION}"


def environment(server: S3Server | None = None) -> dict[str, str]:
    """The AWS variables a process needs to reach the server: the keys, the region, and no
    instance-metadata lookup (on a machine outside EC2 it only costs a timeout). The same for every
    server, so a process started before any server (the tests' Spark session) can have them."""
    return {**CREDENTIALS, "AWS_DEFAULT_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true"}


def ci() -> bool:
    """Whether an S3 server that cannot start fails the tests (CI=true, or TIDEKEEP_TEST_REQUIRE_S3=1)."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"} or bool(os.environ.get("TIDEKEEP_TEST_REQUIRE_S3"))


@contextmanager
def moto_server(log: Path) -> Iterator[S3Server]:
    """Start `moto_server` on a free loopback port (it picks it: port 0) and stop it on exit.
    RuntimeError, naming the log, when it does not listen within START_TIMEOUT_S."""
    executable = Path(sys.executable).with_name("moto_server")
    command = [str(executable)] if executable.exists() else [sys.executable, "-m", "moto.server"]
    with open(log, "wb") as output:
        process = subprocess.Popen([*command, "-H", "127.0.0.1", "-p", "0"], stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            found = _LISTENING.search(log.read_bytes())
            if found:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the moto S3 server did not start (exit code {process.poll()}); see {log}")
            time.sleep(0.05)
        yield S3Server(int(found.group(1)), log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def admin_filesystem(server: S3Server):  # -> pyarrow.fs.S3FileSystem
    """pyarrow's S3 client on the server, allowed to create and delete buckets (the tests' own
    set-up; tidekeep itself never creates or deletes a bucket)."""
    import pyarrow.fs as pafs

    return pafs.S3FileSystem(access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                             secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"], region=REGION,
                             endpoint_override=server.endpoint, scheme="http",
                             allow_bucket_creation=True, allow_bucket_deletion=True)


def new_bucket(server: S3Server) -> str:
    """Create a bucket with a fresh name and return the name."""
    bucket = f"tk-{uuid.uuid4().hex[:20]}"
    admin_filesystem(server).create_dir(bucket)
    return bucket


def drop_bucket(server: S3Server, bucket: str) -> None:
    """Delete a bucket and everything in it (moto keeps objects in memory); a bucket already gone
    (a test dropped it) is no failure."""
    import pyarrow.fs as pafs

    filesystem = admin_filesystem(server)
    if filesystem.get_file_info(bucket).type != pafs.FileType.NotFound:
        filesystem.delete_dir(bucket)


def object_keys(server: S3Server, bucket: str) -> list[str]:
    """Every object key in `bucket` as the S3 API lists it: directory marker objects ("a/b/") too,
    which pyarrow's listing folds into directories."""
    import boto3

    client = boto3.client("s3", endpoint_url=f"http://{server.endpoint}", region_name=REGION,
                          aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return sorted(keys)


def requests_logged(server: S3Server) -> list[str]:
    """The requests the server has answered so far, as "METHOD /path?query" (from its log, whose
    server colours some lines, GETs among them, with terminal escape codes)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", server.log.read_text(errors="replace"))
    return re.findall(r'"([A-Z]+ /[^ "]*) HTTP/1\.1"', text)
