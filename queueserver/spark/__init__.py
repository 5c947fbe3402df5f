"""queueserver.spark: PySpark reads from, writes to and coordinates work through SQS queues.

An optional extra (`pip install -e '.[spark]'` in a clone). It talks to queues only through
the SQS API (boto3 on the driver and the executors), so everything but the
non-destructive browse also works against AWS SQS.

    from queueserver.spark import register, run_workers, consume
    register(spark)   # format "queueserver" for spark.read / readStream / write / writeStream
    df = spark.readStream.format("queueserver").option("endpoint", url).option("queue", "jobs").load()

Importing this package does not import PySpark; the first call that needs it does,
and fails with an instruction if it is missing (see compat.py).
"""

from __future__ import annotations

import importlib
from typing import Any

from queueserver.spark.compat import PySparkMissing, require_pyspark
from queueserver.spark.connection import BrowseNotSupported, Connection
from queueserver.spark.workers import WorkCounts, run_workers

# Names whose modules subclass PySpark classes: imported on first use.
_LAZY = {
    "QueueDataSource": "queueserver.spark.source",
    "QueueWriteError": "queueserver.spark.write",
    "consume": "queueserver.spark.batch_consume",
    "Consumed": "queueserver.spark.batch_consume",
}

__all__ = ["BrowseNotSupported", "Connection", "Consumed", "PySparkMissing", "QueueDataSource", "QueueWriteError",
           "WorkCounts", "consume", "register", "run_workers"]


def register(spark: Any) -> None:
    """Register the "queueserver" format with `spark` (a SparkSession); safe to call again."""
    require_pyspark()
    from queueserver.spark.source import QueueDataSource

    spark.dataSource.register(QueueDataSource)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        require_pyspark()
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'queueserver.spark' has no attribute {name!r}")
