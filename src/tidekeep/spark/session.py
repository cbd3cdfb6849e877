"""The Spark session tidekeep uses: started on demand from settings, with the tidekeep data
source registered so spark.read.format("tidekeep") works.

The session is, in this order: the one given to `tidekeep.connect(spark=...)` (`use_session`), a
Spark Connect session to the server `spark.remote` (or SPARK_REMOTE) names (connect.py), or a
classic session started in this process on `spark.master`.

Every tidekeep job that runs Spark (archive ingest and search, catalog import, job and impact)
gets its session from `job_spark`, which refuses, before Spark starts, files its executors could
not reach on the configured master (cluster.py), and checks the running session's master again
(for a Connect session: the server's, judged as connect.py says).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from ..errors import ConfigError
from ..redaction import SPARK_CONF_REDACTION, SPARK_STRING_REDACTION
from ..store.writable import require_writable_workspace
from .cluster import check_settings_reach
from .connect import REMOTE_SETTING, check_remote_url, is_connect_session, job_master, remote_reach_master
from .masters import is_local_master

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
# the session `tidekeep.connect(spark=...)` was given: every tidekeep job in this process uses it,
# as every job uses the one classic session Spark's getOrCreate keeps per process
_given_session: SparkSession | None = None
# Set by the CLI: called with the Spark UI's URL whenever a command gets a classic session whose UI
# is on, so long commands tell the user where to watch them (docs/configuration.md, "Spark settings").
announce_spark_ui: Callable[[str], None] | None = None
UI_SETTING, CONF_SETTING = "spark.ui", "spark.conf"
_LOOPBACK = "127.0.0.1"
# how long Ctrl-C waits for a Connect server to confirm it interrupted this session's operations
_INTERRUPT_WAIT_S = 10.0


def build_spark(master: str = "local[*]", app_name: str = "tidekeep", *, ui: bool = False,
                conf: Mapping[str, str] | None = None) -> SparkSession:
    """The classic session of this process on `master`. Without `ui` the Spark UI is off; with it,
    where ui_listens allows, Spark's default (on) stands unless Spark's own configuration
    (spark-defaults.conf, PYSPARK_SUBMIT_ARGS) turns it off, and with a local master it listens on
    the loopback address only, unless SPARK_LOCAL_IP says otherwise; the `spark.ui` setting asks
    for it (get_spark).
    `conf`: the `spark.conf` setting, Spark confs checked by spark_conf.py, applied after tidekeep's
    defaults, which they may change."""
    from pyspark.sql import SparkSession

    # executors must run the interpreter that has tidekeep installed, not whatever python3 is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    ui = ui and ui_listens(master, os.environ)
    with _lock, _ui_address(ui and is_local_master(master)):
        builder = (
            SparkSession.builder.master(master)
            .appName(app_name)
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.showConsoleProgress", "false")  # tidekeep shows its own progress bars
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.driver.extraJavaOptions", f"-Duser.timezone=UTC -Dlog4j.configurationFile={_LOG4J}")
            .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
            # a URL's password never shows in the UI, the event log or a plan (docs/spark.md): in
            # configuration values, and in plan texts, where a data source's options may hold one
            .config("spark.redaction.regex", SPARK_CONF_REDACTION)
            .config("spark.sql.redaction.string.regex", SPARK_STRING_REDACTION)
        )
        if not ui:  # on, Spark's own default stands: Spark's configuration files and PYSPARK_SUBMIT_ARGS may change it
            builder = builder.config("spark.ui.enabled", "false")
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        register_data_sources(spark)
        install_interrupt_handler(spark.sparkContext)
        return spark


def ui_listens(master: str, env: Mapping[str, str]) -> bool:
    """Whether the Spark UI may start for a session on `master`, given the driver's environment
    `env`: with a local master it is put on the loopback address (_ui_address); with any other
    master only an address the user chose keeps it off every interface — SPARK_LOCAL_IP, which the
    driver's endpoints use too — so without one the UI stays off rather than serve every network
    without authentication (docs/configuration.md, "Spark settings")."""
    return is_local_master(master) or bool(env.get("SPARK_LOCAL_IP", "").strip())


@contextlib.contextmanager
def _ui_address(loopback: bool) -> Iterator[None]:
    """While the JVM starts, SPARK_LOCAL_IP=127.0.0.1 when `loopback` and the user set none: Spark's
    UI listens on every interface unless that variable names one (no conf chooses its address); and
    SPARK_LOCAL_HOSTNAME alike, so the URL names that address rather than "localhost", which may
    resolve to another one (::1). Only for a local master: the variables also move the driver's own
    endpoints to loopback, which executors on other machines could not reach (docs/configuration.md,
    "Spark settings")."""
    if not loopback or os.environ.get("SPARK_LOCAL_IP"):
        yield
        return
    added = {name: _LOOPBACK for name in ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME") if not os.environ.get(name)}
    os.environ.update(added)
    try:
        yield
    finally:  # read once, by the JVM PySpark launches now: the caller's later processes never see them
        for name in added:
            os.environ.pop(name, None)


def build_remote_spark(url: str) -> SparkSession:
    """A Spark Connect session to the server at `url` (`sc://host:port`): no JVM in this process.
    Only session (runtime) settings can be given to a running server; the static ones, such as the
    redaction of configuration values, are the server's (docs/spark.md, "Spark Connect")."""
    from pyspark.sql import SparkSession

    with _lock:
        spark = (
            SparkSession.builder.remote(url)
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.sql.redaction.string.regex", SPARK_STRING_REDACTION)
            .getOrCreate()
        )
        register_data_sources(spark)
        # this process's operations carry a tag of their own: Ctrl-C interrupts them alone, not those of
        # other processes sharing the server session (a `session_id` in the URL, docs/spark.md)
        tag = f"tidekeep-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        spark.addTag(tag)
        install_connect_interrupt_handler(spark, tag)
        return spark


def install_connect_interrupt_handler(spark: SparkSession, tag: str) -> None:
    """Ctrl-C while a Connect session waits for the server: interrupt the operations tagged `tag` on
    the server (from another thread: the interrupted call holds the main thread), then, with
    `end_process_on_interrupt` set, call it once the server confirmed or the wait ran out; otherwise
    raise KeyboardInterrupt. Ending this process alone would leave the server running the job."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt_quietly() -> None:
        with contextlib.suppress(Exception):  # the server may be gone; the interrupt stands anyway
            spark.interruptTag(tag)

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        interrupter = threading.Thread(target=interrupt_quietly, name="tidekeep-interrupt", daemon=True)
        interrupter.start()
        end_process = end_process_on_interrupt
        if end_process is not None:
            interrupter.join(_INTERRUPT_WAIT_S)
            end_process()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_interrupt)


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
            # threads still talking to the JVM (the progress poller) fail once it is gone, and py4j
            # logs each failure on the root logger: the process ends now, with its one line only
            logging.disable(logging.CRITICAL)
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


def remote_url(settings: Settings) -> str | None:
    """The Spark Connect server the settings name: `spark.remote`, else Spark's own SPARK_REMOTE
    environment variable; None for a classic session. ConfigError naming the source for a value
    that is not an `sc://` URL."""
    configured = settings[REMOTE_SETTING]
    if configured:
        return check_remote_url(configured)
    from_environment = os.environ.get("SPARK_REMOTE", "").strip()
    return check_remote_url(from_environment, "SPARK_REMOTE") if from_environment else None


def use_session(spark: SparkSession | None) -> None:
    """Make `spark` (classic or Connect) the session of every tidekeep job in this process, with the
    tidekeep data sources registered on it; `spark.master`, `spark.remote` are then not used.
    None: back to the session the settings name."""
    global _given_session
    if spark is not None:
        register_data_sources(spark)
    _given_session = spark


def get_spark(settings: Settings) -> SparkSession:
    if _given_session is not None:
        return _given_session
    url = remote_url(settings)
    if url is not None:
        if settings[CONF_SETTING]:
            raise ConfigError(f"{CONF_SETTING!r} applies to the Spark sessions tidekeep starts, not to the "
                              f"Spark Connect server {url}: give that server its confs when it starts "
                              f"(spark-submit --conf), or unset {CONF_SETTING!r}")
        return build_remote_spark(url)
    spark = build_spark(settings["spark.master"], settings["spark.app_name"], ui=settings[UI_SETTING],
                        conf=settings[CONF_SETTING])
    ui_url = spark.sparkContext.uiWebUrl
    announce = announce_spark_ui
    if ui_url and announce is not None:
        announce(ui_url)
    return spark


def check_job_reach(settings: Settings, *, metadata: bool = False, storage: bool = False,
                    inputs: Sequence[str] = ()) -> None:
    """The refusal job_spark makes before Spark starts (ConfigError: files the executors of the
    `spark.master` setting could not reach), for a caller that must refuse before it even opens
    the workspace: opening migrates a store an older tidekeep left (docs/spark.md). A session given
    to `use_session` is judged by its running master; a Connect server elsewhere by its host, with
    no connection; a Connect server on this machine by its own master, so it is connected to first."""
    url = remote_url(settings) if _given_session is None else None
    if _given_session is not None:
        master: str | None = job_master(_given_session)
    elif url is not None:
        master = remote_reach_master(url)
        if master is None:
            master = job_master(get_spark(settings))
    else:
        master = None  # the spark.master setting
    check_settings_reach(settings, master, metadata=metadata, storage=storage, inputs=inputs)


def job_spark(settings: Settings, *, metadata: bool = False, storage: bool = False,
              inputs: Sequence[str] = (), writes: bool = False) -> SparkSession:
    """The session for a job whose executors open the metadata store (`metadata`), the storage
    (`storage`) and the files `inputs`. A configuration they could not reach on the `spark.master`
    setting is refused with ConfigError before Spark starts; a session already running in this
    process (which Spark returns whatever the setting) is checked against its own master too. A
    Connect session or one given to `use_session` is checked once it is known (connect.py,
    `job_master`): connecting starts no JVM here.
    With `writes` the executors write to the stores they open: a local one that is read-only is
    refused (ReadOnlyWorkspace, naming it) before Spark starts, not reported by a failed task."""
    check_job_reach(settings, metadata=metadata, storage=storage, inputs=inputs)
    if writes:
        require_writable_workspace(settings, metadata=metadata, storage=storage)
    spark = get_spark(settings)
    check_settings_reach(settings, job_master(spark), metadata=metadata, storage=storage, inputs=inputs)
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
    # A Connect session has no SparkContext: its sources plan on the server, whose workers judge
    # by the server's environment; job_spark has judged the files by the server's master already.
    from ..config import env_name

    if not is_connect_session(spark):
        spark.sparkContext.environment[env_name("spark.master")] = spark.sparkContext.master
    spark.dataSource.register(TidekeepDataSource)
    from ..catalog.source import CatalogDataSource

    spark.dataSource.register(CatalogDataSource)
    spark._tidekeep_sources_registered = True  # type: ignore[attr-defined]
