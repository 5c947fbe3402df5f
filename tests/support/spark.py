"""Helpers of the Spark tests: where the queues are, the deployments, batch sends, sinks that record, waits.

`SqsTarget` is the one place the tier's connection settings come from (endpoint, region,
credentials): every reader, writer, helper and boto3 client of the tier takes them from it,
so the tier can be pointed at another SQS implementation by changing one fixture.

The deployments (a standalone cluster, a Spark Connect server) are queueserver.spark.deployments's,
started here with pytest's way of failing. The sinks write files rather than append to a
list because over Spark Connect a foreachBatch function runs in a Python process of the
server, not in the test; files work the same in every mode (everything is on one machine).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from queueserver.spark.deployments import ConnectServer, SparkLaunchError, StandaloneCluster, descendants, identity, running

from support import server
from support.clients import json_client

__all__ = ["SqsTarget", "batch_recorder", "descendants", "identity", "load", "python_path", "recorded_batches",
           "running", "send", "start_cluster", "start_connect_server", "wait_for"]


@dataclass(frozen=True)
class SqsTarget:
    """An SQS endpoint and how to sign for it."""

    endpoint: str
    region: str = "us-east-1"
    access_key_id: str = "test"
    secret_access_key: str = "test"

    def options(self) -> dict[str, str]:
        """The data source options (spark.read/readStream/write .option(...))."""
        return {"endpoint": self.endpoint, **self.signing_options()}

    def signing_options(self) -> dict[str, str]:
        """The same but the endpoint: consume()'s extra reader options."""
        return {"region": self.region, "accessKeyId": self.access_key_id, "secretAccessKey": self.secret_access_key}

    def helper_options(self) -> dict[str, str]:
        """run_workers' keyword arguments for the same (its endpoint is positional)."""
        return {"region": self.region, "access_key_id": self.access_key_id,
                "secret_access_key": self.secret_access_key}

    def client(self) -> Any:
        return json_client(self.endpoint, self.region, aws_access_key_id=self.access_key_id,
                           aws_secret_access_key=self.secret_access_key)


def send(sqs: Any, queue_url: str, bodies: list[str], **kwargs: Any) -> None:
    """SendMessageBatch, ten a call; kwargs(i) may give per-message extras via a callable."""
    for start in range(0, len(bodies), 10):
        entries = []
        for i, body in enumerate(bodies[start:start + 10], start):
            entry: dict[str, Any] = {"Id": str(i - start), "MessageBody": body}
            for key, value in kwargs.items():
                entry[key] = value(i) if callable(value) else value
            entries.append(entry)
        response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        assert not response.get("Failed"), response["Failed"]


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 30.0,
             detail: Callable[[], str] | None = None) -> Any:
    return server.wait_for(predicate, what, timeout, interval=0.05, detail=detail)


def load(source: Any, target: SqsTarget, queue_url: str, **options: str) -> Any:
    """A queueserver DataFrame from `source` (spark.read or spark.readStream) with these options."""
    reader = source.format("queueserver").option("queue", queue_url)
    for key, value in {**target.options(), **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def batch_recorder(directory: Path, *, partition_ids: bool = False) -> Callable[[Any, int], None]:
    """A foreachBatch function that writes each micro-batch's rows to a JSON file in `directory`.

    With `partition_ids` each row also gets the Spark partition it was read in (`partition_id`).
    It is a closure, so it pickles by value: the Connect server's Python need not import the tests.
    """
    directory.mkdir(parents=True, exist_ok=True)
    folder = str(directory)

    def record(df: Any, batch_id: int) -> None:
        import json
        import os
        import uuid

        if partition_ids:
            from pyspark.sql.functions import spark_partition_id

            df = df.withColumn("partition_id", spark_partition_id())
        rows = [row.asDict(recursive=True) for row in df.collect()]
        name = f"{batch_id:06d}-{uuid.uuid4().hex}.json"
        with open(os.path.join(folder, "." + name), "w") as out:
            json.dump({"batch_id": batch_id, "rows": rows}, out, default=str)
        os.rename(os.path.join(folder, "." + name), os.path.join(folder, name))  # whole files only

    return record


def recorded_batches(directory: Path) -> list[tuple[int, list[Any]]]:
    """What a batch_recorder wrote: (batch id, rows as pyspark Rows), in batch order."""
    from pyspark.sql import Row

    batches = []
    for path in sorted(directory.glob("[0-9]*.json")):
        record = json.loads(path.read_text())
        batches.append((int(record["batch_id"]), [Row(**row) for row in record["rows"]]))
    return batches


def start_cluster(base_dir: Path, env: dict[str, str]) -> StandaloneCluster:
    """A standalone master and two workers (one core, 1 GB each) on loopback; a start that fails fails the test."""
    cluster = StandaloneCluster(base_dir, workers=2, cores=1, memory="1g", env=env)
    try:
        return cluster.start()
    except SparkLaunchError as exc:
        cluster.stop()
        pytest.fail(f"the standalone cluster did not start: {exc}", pytrace=False)


def start_connect_server(base_dir: Path, env: dict[str, str]) -> ConnectServer:
    """A Spark Connect server on loopback (its Spark on local[2]); a start that fails fails the test."""
    connect = ConnectServer(base_dir, env=env)
    try:
        return connect.start()
    except SparkLaunchError as exc:
        connect.stop()
        pytest.fail(f"the Spark Connect server did not start: {exc}", pytrace=False)


def python_path(*folders: Path) -> str:
    """$PYTHONPATH with `folders` first (once each): what Spark's Python workers import from."""
    entries = [str(f) for f in folders] + [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    return os.pathsep.join(dict.fromkeys(entries))
