"""Fixtures of the Spark tests: one local[2] SparkSession for the whole run, one real queueserver, boto3.

Every test here carries the `spark` marker (added below if a module forgets), which the
default `pytest` run deselects and `.ci/run` selects in a step of its own:
`python -m pytest -m spark tests/spark`. These tests never skip: without PySpark or
Java they fail with what to install, and a skip is turned into a failure, so CI can
not pass without having run them.

Why one session and a real-clock server: a SparkSession takes 5-10 s to start here,
and Spark's own timing (micro-batches, task kills) cannot be
moved by the server's test clock, so visibility timeouts in these tests are real and
short (2-3 s).

This module must import without PySpark: the default run collects (and deselects) it.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.clients import json_client
from support.server import REPO_ROOT, Server, start
from support.sqs import arn_of, redrive_policy

SPARK_DIR = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/spark `spark` before `-m` selects (tryfirst)."""
    for item in items:
        if SPARK_DIR in Path(str(item.path)).parents and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A Spark test that skips fails instead: CI must never pass without running them."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and SPARK_DIR in Path(str(item.path)).parents and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"a Spark test must not skip (it was skipped: {report.longrepr})"


@pytest.fixture(scope="session")
def qserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # On the real clock: Spark's own timing cannot follow the server's test clock.
    server = start(tmp_path_factory.mktemp("spark-server") / "queues.db", "--log-level", "warning")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def endpoint(qserver: Server) -> str:
    return qserver.endpoint


@pytest.fixture(scope="session")
def spark_sqs(endpoint: str) -> Any:
    """A JSON client of the Spark tier's own (real-clock) server."""
    return json_client(endpoint)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one SparkSession: local[2], no UI, JVM flags that start it faster."""
    from queueserver.spark import PySparkMissing, require_pyspark

    try:
        require_pyspark()
    except PySparkMissing as exc:
        pytest.fail(f"{exc} (the spark tests fail rather than skip without it)", pytrace=False)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Spark needs Java 17 or 21: apt-get install openjdk-17-jre-headless", pytrace=False)
    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors must import queueserver from this venv
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("queueserver-spark-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "1g").config("spark.sql.streaming.stopTimeout", "10s")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
               .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    from queueserver.spark import register

    register(session)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(autouse=True)
def _no_leftover_queries(request: pytest.FixtureRequest) -> Iterator[None]:
    """A failing test must not leave a stream running into the next one."""
    yield
    if "spark" in request.fixturenames:
        session = request.getfixturevalue("spark")
        for query in session.streams.active:
            query.stop()


@pytest.fixture
def make_spark_queue(spark_sqs: Any) -> Callable[..., str]:
    """make_spark_queue(name="q", fifo=False, attributes=None, dead_letter_after=None) -> URL of a fresh queue.

    With dead_letter_after=N the queue gets a fresh dead-letter queue (its URL is in
    `make_spark_queue.dead_letters[url]`) and a RedrivePolicy with maxReceiveCount N.
    """
    dead_letters: dict[str, str] = {}

    def make(name: str = "q", fifo: bool = False, attributes: dict[str, str] | None = None,
             dead_letter_after: int | None = None) -> str:
        suffix = ".fifo" if fifo else ""
        attrs = dict(attributes or {})
        if fifo:
            attrs.setdefault("FifoQueue", "true")
        dlq_url = None
        if dead_letter_after is not None:
            dlq_url = spark_sqs.create_queue(QueueName=f"{name}-dlq-{uuid.uuid4().hex[:8]}{suffix}",
                                       Attributes={"FifoQueue": "true"} if fifo else {})["QueueUrl"]
            attrs["RedrivePolicy"] = redrive_policy(arn_of(spark_sqs, dlq_url), str(dead_letter_after))
        url = str(spark_sqs.create_queue(QueueName=f"{name}-{uuid.uuid4().hex[:10]}{suffix}",
                                         Attributes=attrs)["QueueUrl"])
        if dlq_url is not None:
            dead_letters[url] = dlq_url
        return url

    make.dead_letters = dead_letters  # type: ignore[attr-defined]
    return make
