"""Spark Connect: which server a job uses, and what it means for the files its executors open.

With `spark.remote` (`sc://host:port`, or Spark's own SPARK_REMOTE) every tidekeep job runs on a
Spark Connect server instead of a JVM started in this process (docs/spark.md, "Spark Connect").
The driver of the job's Spark work is then the server, not this process: the data sources plan in
the server's Python workers and the tasks run on its executors. A server on this machine (a
loopback host) with a local master shares this machine's files; any other server may not, and is
judged as a non-local master is (cluster.py).

The API tidekeep uses works on both kinds of session (classic and Connect): every job is built on
DataFrames (`mapInArrow` for Python work, results collected as rows), cancellation is by tags
(`tagged_jobs`); the default parallelism (`default_parallelism`), the progress
source, the tagging and Ctrl-C differ (progress.py, session.py). No job uses RDDs or
accumulators, which a Connect session lacks.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REMOTE_SETTING = "spark.remote"
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def check_remote_url(url: str, setting: str = REMOTE_SETTING) -> str:
    """The Spark Connect URL `url` (`sc://host[:port][/;param=value...]`), stripped; ConfigError naming
    `setting` when it is not one."""
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme != "sc" or not parts.hostname:
        raise ConfigError(f"{setting} {url!r} is not a Spark Connect URL: expected sc://host:port")
    del port  # only checked: urlsplit raises for a port that is not a number in range
    return text


def is_loopback_host(host: str) -> bool:
    """True for a host name or address that is this machine (localhost, 127.0.0.0/8, ::1)."""
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def reach_master(connect_host: str | None, server_master: str) -> str:
    """The master to judge a job's files by (cluster.py): the session's own master for a classic
    session (`connect_host` None) and for a Connect server on this machine; for a server elsewhere
    `sc://host`, a non-local master, since its executors do not see this machine's files whatever
    its own master is."""
    if connect_host is None or is_loopback_host(connect_host):
        return server_master
    return f"sc://{connect_host}"


def remote_reach_master(url: str) -> str | None:
    """The master a job on the Connect server at `url` is judged by, when that is known without
    connecting: `sc://host` for a server elsewhere (reach_master); None for a server on this
    machine, whose own master decides."""
    host = urlsplit(url).hostname or ""
    return None if is_loopback_host(host) else reach_master(host, "")


def is_connect_session(spark: object) -> bool:
    """True for a Spark Connect session (pyspark.sql.connect), False for a classic one; told apart by
    the class's module so that a classic-only install need not import the Connect client."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def connect_host(spark: SparkSession) -> str | None:
    """The host of the Connect server a Connect session talks to (None for a classic session)."""
    if not is_connect_session(spark):
        return None
    return str(spark.client.host)  # type: ignore[attr-defined]  # the Connect session's client


def job_master(spark: SparkSession) -> str:
    """The master a running session's jobs are judged by (reach_master). A classic session's is its
    SparkContext's: the session conf's `spark.master` is whatever the last builder asked for, as
    `getOrCreate()` copies a builder's master into an existing session's conf without moving it. A
    Connect session has no SparkContext; its conf carries the server's master."""
    if not is_connect_session(spark):
        return str(spark.sparkContext.master)
    return reach_master(connect_host(spark), str(spark.conf.get("spark.master")))


def default_parallelism(spark: SparkSession) -> int:
    """Spark's default parallelism (the partitions a job spreads small work over): the session's
    `spark.default.parallelism` when set, else the SparkContext's on a classic session, else, on a
    Connect session, which has no SparkContext, `parallelism_by_query`."""
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return max(1, int(configured))
    if not is_connect_session(spark):
        return max(1, int(spark.sparkContext.defaultParallelism))
    return parallelism_by_query(spark)


def parallelism_by_query(spark: SparkSession) -> int:
    """The default parallelism as a query reads it: a range without a partition count gets that many
    slices, and the only row of a one-row range lands in the last of them (one small job)."""
    from pyspark.sql import functions as F

    row = spark.range(1).select(F.spark_partition_id().alias("slice")).first()
    return 1 if row is None else int(row["slice"]) + 1


@contextlib.contextmanager
def tagged_jobs(spark: SparkSession, tag: str) -> Iterator[Callable[[], None]]:
    """The Spark jobs this thread starts inside the block carry `tag`; yields a function that
    cancels them, callable from any thread. A Connect session tags its operations
    (`addTag`/`interruptTag`); a classic session tags the SparkContext's jobs (`addJobTag`/
    `cancelJobsWithTag`) with interrupt-on-cancel, because a classic session's `interruptTag`
    called from another thread finds no operation of this thread's to interrupt."""
    if is_connect_session(spark):
        spark.addTag(tag)

        def interrupt() -> None:
            spark.interruptTag(tag)

        try:
            yield interrupt
        finally:
            spark.removeTag(tag)
        return
    sc = spark.sparkContext
    previous = sc.getLocalProperty("spark.job.interruptOnCancel")
    sc.addJobTag(tag)
    sc.setInterruptOnCancel(True)
    try:
        yield lambda: sc.cancelJobsWithTag(tag)
    finally:
        sc.removeJobTag(tag)
        sc.setLocalProperty("spark.job.interruptOnCancel", previous or "false")


__all__ = ["REMOTE_SETTING", "check_remote_url", "connect_host", "default_parallelism", "is_connect_session",
           "is_loopback_host", "job_master", "parallelism_by_query", "reach_master",
           "tagged_jobs"]
