"""The Spark session tidekeep uses: started on demand from settings, with the tidekeep data
source registered so spark.read.format("tidekeep") works.

Every tidekeep job that runs Spark (archive ingest and search, catalog import, job and impact)
gets its session from `job_spark`, which refuses, before Spark starts, files its executors could
not reach on the configured master (cluster.py), and checks the running session's master again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from ..redaction import SPARK_CONF_REDACTION, SPARK_STRING_REDACTION
from ..store.writable import require_writable_workspace
from .cluster import check_settings_reach

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from ..config import Settings

_lock = threading.Lock()
# Set by the CLI: Ctrl-C during a Spark job then stops the JVM at once and calls this, which reports
# the interrupt and ends the process as a kill would, which every Spark job is safe against
# (docs/spark.md, "Ctrl-C"); unwinding instead would run cleanup that calls the JVM on the
# connection the interrupt broke, and the JVM would log the tasks it kills on the user's terminal.
end_process_on_interrupt: Callable[[], NoReturn] | None = None
_LOG4J = Path(__file__).with_name("log4j2.properties").as_uri()


def build_spark(master: str = "local[*]", app_name: str = "tidekeep") -> SparkSession:
    from pyspark.sql import SparkSession

    # executors must run the interpreter that has tidekeep installed, not whatever python3 is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    with _lock:
        spark = (
            SparkSession.builder.master(master)
            .appName(app_name)
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")  # tidekeep shows its own progress bars
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.driver.extraJavaOptions", f"-Duser.timezone=UTC -Dlog4j.configurationFile={_LOG4J}")
            .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
            # a URL's password never shows in the UI, the event log or a plan (docs/spark.md): in
            # configuration values, and in plan texts, where a data source's options may hold one
            .config("spark.redaction.regex", SPARK_CONF_REDACTION)
            .config("spark.sql.redaction.string.regex", SPARK_STRING_REDACTION)
            .getOrCreate()
        )
        register_data_sources(spark)
        install_interrupt_handler(spark.sparkContext)
        return spark


def install_interrupt_handler(sc: SparkContext) -> None:
    """Ctrl-C while the driver waits for Spark: with `end_process_on_interrupt` set, stop the JVM and
    call it; otherwise cancel the running jobs and raise KeyboardInterrupt.

    PySpark's own handler cancels from inside the signal handler, on the connection to the JVM the
    interrupted call is still using; that call fails ("reentrant call"), the jobs go on, and py4j
    logs both tracebacks. Cancelling from another thread uses a connection of its own."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers belong to the main thread (PySpark skips it there too)

    def cancel_quietly() -> None:
        with contextlib.suppress(Exception):  # the JVM may be gone already; the interrupt stands anyway
            sc.cancelAllJobs()

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        end_process = end_process_on_interrupt
        if end_process is not None:
            _kill_jvm(sc)
            end_process()
        threading.Thread(target=cancel_quietly, name="tidekeep-cancel-jobs", daemon=True).start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_interrupt)


def _kill_jvm(sc: SparkContext) -> None:
    """SIGKILL to the JVM PySpark started for this process (nothing when it connected to one it did
    not start). Its Python daemon sees the JVM go and stops the workers."""
    # PySpark keeps the JVM's process (a subprocess.Popen) on the gateway and offers no public handle
    process = getattr(getattr(sc, "_gateway", None), "proc", None)
    if process is not None:
        with contextlib.suppress(OSError):
            process.kill()
            process.wait(timeout=10)


def get_spark(settings: Settings) -> SparkSession:
    return build_spark(settings["spark.master"], settings["spark.app_name"])


def job_spark(settings: Settings, *, metadata: bool = False, storage: bool = False,
              inputs: Sequence[str] = (), writes: bool = False) -> SparkSession:
    """The session for a job whose executors open the metadata store (`metadata`), the storage
    (`storage`) and the files `inputs`. A configuration they could not reach on the `spark.master`
    setting is refused with ConfigError before Spark starts; a session already running in this
    process (which Spark returns whatever the setting) is checked against its own master too.
    With `writes` the executors write to the stores they open: a local one that is read-only is
    refused (ReadOnlyWorkspace, naming it) before Spark starts, not reported by a failed task."""
    check_settings_reach(settings, metadata=metadata, storage=storage, inputs=inputs)
    if writes:
        require_writable_workspace(settings, metadata=metadata, storage=storage)
    spark = get_spark(settings)
    check_settings_reach(settings, spark.sparkContext.master, metadata=metadata, storage=storage, inputs=inputs)
    return spark


def register_data_sources(spark: SparkSession) -> None:
    # once per session: every get_spark() returns the same session, and registering again makes
    # Spark log a "replaced a previously registered data source" warning on every command
    if getattr(spark, "_tidekeep_sources_registered", False):
        return
    try:
        from .datasource import TidekeepDataSource
    except ImportError:  # pragma: no cover - the data source module is part of the package
        return
    # The sources plan in Python workers that know nothing of the session: tell them its master as
    # the spark.master setting, through the environment PySpark gives the workers of every Python
    # function made from now on (it reads SparkContext.environment when it wraps one), so their
    # check of the storage and metadata store against the master (cluster.py) sees the real one.
    from ..config import env_name

    spark.sparkContext.environment[env_name("spark.master")] = spark.sparkContext.master
    spark.dataSource.register(TidekeepDataSource)
    from ..catalog.source import CatalogDataSource

    spark.dataSource.register(CatalogDataSource)
    spark._tidekeep_sources_registered = True  # type: ignore[attr-defined]
