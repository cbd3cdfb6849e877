"""The "tidekeep" Spark data source: batch reads of a stream between two cuts, and the entry
point Spark resolves format("tidekeep") to for every direction.

    spark.read.format("tidekeep").option("stream", "iot/sensors")
        .option("start", cut).option("end", cut).load()

`TidekeepDataSource` checks the options at load() and hands streaming reads to stream_source.py
and writes to sink.py; the batch reader plans and reads through partitions.py, the options are
read by options.py. Those modules never import this one, so the source sits on top of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from ..streams.cuts import StreamCut
from .connect import job_master
from .options import (
    KNOWN_READ_OPTIONS,
    SOURCE_NAME,
    STREAM_ONLY,
    ReadOptions,
    caller_options,
    parse_read_options,
)
from .partitions import SPARK_SCHEMA, ChunkPartition, check_read, plan_partitions, read_partition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class TidekeepDataSource(DataSource):
    """spark.read.format("tidekeep"); see the module docstring and docs/spark.md."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        # Spark calls this at load(), for spark.read and spark.readStream alike: fail there, with
        # tidekeep's message, on bad options. Streaming-only options mark a streaming read.
        lowered = {str(k).lower() for k in self.options}
        if lowered & STREAM_ONLY:
            from .stream_source import check_stream_options

            check_stream_options(self.options)
        else:
            check_read(parse_read_options(self.options, KNOWN_READ_OPTIONS))
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return TidekeepBatchReader(parse_read_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .stream_source import TidekeepStreamReader

        return TidekeepStreamReader(self.options)

    # writes (docs/spark.md "Writing"): df.write / df.writeStream .format("tidekeep"); the sink lives in sink.py
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import make_batch_writer

        return make_batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import make_stream_writer

        return make_stream_writer(self.options, schema, overwrite)


class TidekeepBatchReader(DataSourceReader):
    """Plans on the driver in partitions(); read() runs on executors with the partition alone."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        return plan_partitions(self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ChunkPartition):
            return iter(())  # Spark asks for one placeholder partition when a read has none
        return read_partition(partition)


def load_stream(spark: SparkSession, stream: str, start: StreamCut | str | None = None,
                end: StreamCut | str | None = None, **options: str | int | Path) -> DataFrame:
    """spark.read.format("tidekeep") with the options checked in the caller first, so bad input
    raises tidekeep's typed errors here rather than a Spark AnalysisException that wraps them.
    `options`: home, metadata_url, storage, partition_size (as for the data source); a password in
    metadata_url is passed on by reference (credentials.py)."""
    raw = caller_options({"stream": stream, "start": start, "end": end, **options}, job_master(spark))
    check_read(parse_read_options(raw))
    return spark.read.format(SOURCE_NAME).options(**raw).load()


__all__ = ["TidekeepBatchReader", "TidekeepDataSource", "load_stream"]
