"""`QueueDataSource`: the Python data source behind format("queueserver").

It is plain Python on PySpark's Data Source API (pyspark >= 4.2 for streaming), so
there is no jar and no JVM code. Spark pickles the source and everything it returns,
so the readers and writers here hold only frozen settings; clients are made in the
process that uses them.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from queueserver.spark.batch_read import QueueBatchReader
from queueserver.spark.options import ReadSettings, WriteSettings
from queueserver.spark.rows import SCHEMA
from queueserver.spark.stream_read import QueueStreamReader
from queueserver.spark.write import QueueStreamWriter, QueueWriter, make_plan

FORMAT = "queueserver"


class QueueDataSource(DataSource):  # type: ignore[misc]
    """Reads and writes SQS queues; see docs/spark.md for the options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return QueueBatchReader(ReadSettings.from_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return QueueStreamReader(ReadSettings.from_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return QueueWriter(make_plan(WriteSettings.from_options(self.options), schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return QueueStreamWriter(make_plan(WriteSettings.from_options(self.options), schema, overwrite))
