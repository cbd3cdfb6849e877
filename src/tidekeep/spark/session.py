"""The Spark session tidekeep uses: started on demand from settings, with the tidekeep data
source registered so spark.read.format("tidekeep") works.

Every tidekeep job that runs Spark (archive ingest and search, catalog import, job and impact)
gets its session from `job_spark`, which refuses, before Spark starts, files its executors could
not reach on the configured master (cluster.py), and checks the running session's master again.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..redaction import SPARK_CONF_REDACTION, SPARK_STRING_REDACTION
from .cluster import check_settings_reach

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..config import Settings

_lock = threading.Lock()
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
        return spark


def get_spark(settings: Settings) -> SparkSession:
    return build_spark(settings["spark.master"], settings["spark.app_name"])


def job_spark(settings: Settings, *, metadata: bool = False, storage: bool = False,
              inputs: Sequence[str] = ()) -> SparkSession:
    """The session for a job whose executors open the metadata store (`metadata`), the storage
    (`storage`) and the files `inputs`. A configuration they could not reach on the `spark.master`
    setting is refused with ConfigError before Spark starts; a session already running in this
    process (which Spark returns whatever the setting) is checked against its own master too."""
    check_settings_reach(settings, metadata=metadata, storage=storage, inputs=inputs)
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
