"""Fixtures of the Spark tests: three Spark deployments, one real queueserver each way, boto3.

Every test here carries the `spark` marker (added below if a module forgets), which the
default `pytest` run deselects and `.ci/run` selects in a step of its own:
`python -m pytest -m spark tests/spark`. These tests never skip: without PySpark or
Java they fail with what to install, and a skip is turned into a failure, so CI can
not pass without having run them.

The deployments, `spark_mode` (a test id's `[local]`, `[cluster]` or `[connect]`):
- local: one local[2] SparkSession in this process (executors are threads of one JVM);
- cluster: a standalone master and two workers (queueserver.spark.deployments), a session on
  spark://127.0.0.1:PORT: two executor JVMs with their own Python workers;
- connect: a Spark Connect server (its Spark on local[2]) and a client session
  sc://127.0.0.1:PORT, which has no SparkContext.
A test runs on all three unless `@pytest.mark.spark_modes(...)` names fewer. The mode is
a session-scoped parameter, so pytest runs the tests mode by mode and each deployment is
started once and stopped (no process left, checked) before the next starts.

Why the queueserver runs on the real clock: Spark's own timing (micro-batches, task
retries) cannot follow the server's test clock, so visibility timeouts in these tests
are real and short (2-3 s). The executor-loss tests use a second server on the test
clock (`clocked_target`), because there nothing must come back before the test says so.

This module must import without PySpark: the default run collects (and deselects) it.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from queueserver.spark.deployments import ConnectServer, StandaloneCluster, session
from support.server import REPO_ROOT, ClockControl, Server, start
from support.spark import SqsTarget, python_path, start_cluster, start_connect_server, wait_for
from support.sqs import arn_of, redrive_policy

SPARK_DIR = Path(__file__).resolve().parent
SPARK_MODES = ("local", "cluster", "connect")
SESSION_CONF = {"spark.default.parallelism": "2"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark_modes(*modes): the Spark deployments a test runs on "
                                       f"(some of {', '.join(SPARK_MODES)}; all of them without the marker)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/spark `spark` before `-m` selects (tryfirst)."""
    for item in items:
        if SPARK_DIR in Path(str(item.path)).parents and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that uses a SparkSession runs once per deployment of its `spark_modes` (all by default)."""
    if "spark_mode" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("spark_modes")
        modes = marker.args if marker else SPARK_MODES
        unknown = set(modes) - set(SPARK_MODES)
        assert not unknown, f"unknown spark_modes {unknown}: the modes are {SPARK_MODES}"
        metafunc.parametrize("spark_mode", [m for m in SPARK_MODES if m in modes], indirect=True, scope="session")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A Spark test that skips fails instead: CI must never pass without running them."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and SPARK_DIR in Path(str(item.path)).parents and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"a Spark test must not skip (it was skipped: {report.longrepr})"


def _served(tmp_path_factory: pytest.TempPathFactory, folder: str, *args: str) -> Iterator[Server]:
    """One queueserver for the whole tier, quiet in the log, stopped (and checked) at the end."""
    server = start(tmp_path_factory.mktemp(folder) / "queues.db", *args, "--log-level", "warning")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def qserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # On the real clock: Spark's own timing cannot follow the server's test clock.
    yield from _served(tmp_path_factory, "spark-server")


@pytest.fixture(scope="session")
def target(qserver: Server) -> SqsTarget:
    """Where the tier's queues are: endpoint, region and credentials for every reader, writer and client."""
    return SqsTarget(qserver.endpoint)


@pytest.fixture(scope="session")
def spark_sqs(target: SqsTarget) -> Any:
    """A JSON client of the Spark tier's own (real-clock) server."""
    return target.client()


@pytest.fixture(scope="session")
def clocked_qserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _served(tmp_path_factory, "spark-clocked-server", "--test-clock")


@pytest.fixture(scope="session")
def clocked_target(clocked_qserver: Server) -> SqsTarget:
    """A second queueserver, on the test clock: its visibility timeouts end only when `spark_clock` moves."""
    return SqsTarget(clocked_qserver.endpoint)


@pytest.fixture(scope="session")
def spark_clock(clocked_qserver: Server) -> ClockControl:
    return ClockControl(clocked_qserver.endpoint)


@dataclass
class SparkDeployment:
    """The session of one mode, and the cluster under it in mode cluster."""

    mode: str
    session: Any
    cluster: StandaloneCluster | None = None


@pytest.fixture(scope="session")
def spark_mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def spark_deployment(spark_mode: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkDeployment]:
    """Start the mode's deployment and session; at the end stop both and check that no process is left."""
    from queueserver.spark import PySparkMissing, register, require_pyspark

    try:
        require_pyspark()
    except PySparkMissing as exc:
        pytest.fail(f"{exc} (the spark tests fail rather than skip without it)", pytrace=False)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Spark needs Java 17 or 21: apt-get install openjdk-17-jre-headless", pytrace=False)
    # Spark's Python workers run this venv's interpreter, which has queueserver installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYTHONPATH"] = python_path(REPO_ROOT)
    base = tmp_path_factory.mktemp(f"spark-{spark_mode}")
    conf = {**SESSION_CONF, "spark.local.dir": str(base / "local")}
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]}
    deployment: StandaloneCluster | ConnectServer | None = None
    spark: SparkDeployment | None = None
    try:
        if spark_mode == "local":
            spark = SparkDeployment(spark_mode, session("local[2]", "queueserver-spark-tests", conf))
        elif spark_mode == "cluster":
            deployment = start_cluster(base / "cluster", env)
            conf |= deployment.session_conf() | {"spark.executorEnv.PYTHONPATH": env["PYTHONPATH"]}
            spark = SparkDeployment(spark_mode, session(deployment.master_url, "queueserver-spark-tests", conf),
                                    cluster=deployment)
            tracker = spark.session.sparkContext.statusTracker()
            # The driver counts as one: wait for both executors, so that no test starts on one.
            wait_for(lambda: len(tracker.getExecutorInfos()) >= 3, "both executors to register", timeout=240)
        else:
            deployment = start_connect_server(base / "connect", env)
            spark = SparkDeployment(spark_mode, session(deployment.url))
        register(spark.session)
        yield spark
    finally:
        if spark is not None:
            for query in spark.session.streams.active:
                query.stop()
            spark.session.stop()
        # A Connect session marks the whole process as a Connect client; a later classic session must not be one.
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        strays = deployment.stop() if deployment is not None else []
        assert not strays, f"processes of the {spark_mode} deployment outlived its stop (killed now): {strays}"


@pytest.fixture(scope="session")
def spark(spark_deployment: SparkDeployment) -> Any:
    """The SparkSession of the test's mode (a Connect client session in mode connect)."""
    return spark_deployment.session


@pytest.fixture
def spark_cluster(spark_deployment: SparkDeployment) -> StandaloneCluster:
    """The standalone cluster under the session (for tests marked spark_modes("cluster"))."""
    assert spark_deployment.cluster is not None, "spark_cluster needs @pytest.mark.spark_modes('cluster')"
    return spark_deployment.cluster


@pytest.fixture(autouse=True)
def _no_leftover_queries(request: pytest.FixtureRequest) -> Iterator[None]:
    """A failing test must not leave a stream running into the next one."""
    yield
    if "spark" in request.fixturenames:
        session = request.getfixturevalue("spark")
        for query in session.streams.active:
            query.stop()


def _queue_factory(sqs: Any) -> Callable[..., str]:
    """make(name="q", fifo=False, attributes=None, dead_letter_after=None) -> URL of a fresh queue on `sqs`.

    With dead_letter_after=N the queue gets a fresh dead-letter queue (its URL is in
    `make.dead_letters[url]`) and a RedrivePolicy with maxReceiveCount N.
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
            dlq_url = sqs.create_queue(QueueName=f"{name}-dlq-{uuid.uuid4().hex[:8]}{suffix}",
                                       Attributes={"FifoQueue": "true"} if fifo else {})["QueueUrl"]
            attrs["RedrivePolicy"] = redrive_policy(arn_of(sqs, dlq_url), str(dead_letter_after))
        url = str(sqs.create_queue(QueueName=f"{name}-{uuid.uuid4().hex[:10]}{suffix}", Attributes=attrs)["QueueUrl"])
        if dlq_url is not None:
            dead_letters[url] = dlq_url
        return url

    make.dead_letters = dead_letters  # type: ignore[attr-defined]
    return make


@pytest.fixture
def make_spark_queue(spark_sqs: Any) -> Callable[..., str]:
    """A fresh queue on the tier's server (see _queue_factory)."""
    return _queue_factory(spark_sqs)


@pytest.fixture
def make_clocked_queue(clocked_target: SqsTarget) -> Callable[..., str]:
    """A fresh queue on the test-clock server (see _queue_factory)."""
    return _queue_factory(clocked_target.client())
