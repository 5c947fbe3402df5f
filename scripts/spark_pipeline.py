"""An example data pipeline on Spark that hands its work through queueserver and survives being killed.

    python scripts/spark_pipeline.py demo [--items 1000]        # the whole story on one machine
    python scripts/spark_pipeline.py run --endpoint URL --workdir DIR [--items 1000]

`run` is one driver run, and can be killed at any point and started again:
  1. enqueue: a DataFrame of work items is written to the queue `pipeline-work` (once: a
     marker file in the work directory records that the write committed);
  2. work: `run_workers` runs competing consumers on the executors; each item's handler
     computes its result and sends it to the queue `pipeline-results`; an item that keeps
     failing ends in `pipeline-work-dlq` through the queue's RedrivePolicy;
  3. collect: a streaming read of `pipeline-results` with availableNow appends the
     results to Parquet (`DIR/results`), deleting each message only after its batch
     committed; readers dedupe on item_id (delivery is at-least-once).
`demo` starts a queueserver, runs the driver, SIGKILLs it with every process below it (on
local[N] the JVM and Spark's Python workers too) once about 40% of the work is done, runs it
again, and checks that the Parquet output has every item once and the dead-letter queue the
bad ones. `--master spark://...` or `sc://...` runs it on a standalone cluster or a Spark
Connect server of this machine (queueserver.spark.deployments starts one); there the kill leaves the
executors (or the Connect server's job) running a while, and they finish items of their own.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from queueserver.spark import deployments

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

log = logging.getLogger("spark_pipeline")

WORK, RESULTS, DEAD_LETTERS = "pipeline-work", "pipeline-results", "pipeline-work-dlq"
BAD_ITEMS = (13, 777)  # items whose payload the handler cannot parse: they end in the dead-letter queue


# --- one driver run -------------------------------------------------------------------------


def session(master: str) -> Any:
    """A session on `master` (local[N], spark://..., sc://...); executors import queueserver from this venv."""
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    conf = {} if master.startswith("sc://") else {"spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"]}
    return deployments.session(master, "queueserver-pipeline", conf)


def ensure_queues(endpoint: str, visibility_timeout: int) -> Any:
    from queueserver.spark import Connection

    sqs = Connection(queue=WORK, endpoint=endpoint).client()
    dlq = sqs.create_queue(QueueName=DEAD_LETTERS)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.create_queue(QueueName=WORK, Attributes={
        "VisibilityTimeout": str(visibility_timeout),
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "3"})})
    sqs.create_queue(QueueName=RESULTS)
    return sqs


def make_handler(endpoint: str, work_seconds: float, run: str) -> Any:
    """The work: checks the item, works for `work_seconds`, sends a result. Pickled to the executors."""

    def handle(message: dict[str, Any]) -> None:
        from queueserver.spark import Connection

        item = json.loads(message["Body"])
        payload = json.loads(item["payload"])  # the bad items' payload is not JSON: they fail every time
        time.sleep(work_seconds)  # stands for a call to another service
        digest = hashlib.sha256(str(payload["n"]).encode()).hexdigest()
        results = Connection(queue=RESULTS, endpoint=endpoint)
        results.client().send_message(QueueUrl=results.queue_url(), MessageBody=json.dumps(
            {"item_id": item["item_id"], "digest": digest, "run": run,
             "attempt": int(message["Attributes"]["ApproximateReceiveCount"])}))

    return handle


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql.functions import col, from_json

    from queueserver.spark import register, run_workers

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"run": args.run_name}
    started = time.monotonic()
    spark = session(args.master)
    register(spark)
    ensure_queues(args.endpoint, args.visibility_timeout)
    figures["session_s"] = round(time.monotonic() - started, 1)

    marker = workdir / "enqueued"
    if not marker.exists():
        t = time.monotonic()
        items = spark.range(args.items).selectExpr(
            "id as item_id",
            f"if(id in ({', '.join(map(str, BAD_ITEMS))}), 'not json', to_json(named_struct('n', id * id))) as payload")
        items.write.format("queueserver").option("endpoint", args.endpoint).option("queue", WORK) \
            .mode("append").save()
        marker.touch()  # after the write committed: a run killed before this line enqueues again
        figures["enqueued"], figures["enqueue_s"] = args.items, round(time.monotonic() - t, 1)

    t = time.monotonic()
    counts = run_workers(spark, args.endpoint, WORK, make_handler(args.endpoint, args.work_seconds, args.run_name),
                         parallelism=2, visibility_timeout=args.visibility_timeout, concurrency=args.concurrency,
                         wait_time_seconds=1, idle_polls=2)
    figures.update(work_s=round(time.monotonic() - t, 1), succeeded=counts.succeeded, failed=counts.failed,
                   extended=counts.extended)

    t = time.monotonic()
    schema = "item_id long, digest string, run string, attempt int"

    def to_parquet(batch: Any, batch_id: int) -> None:
        batch.select(from_json(col("body"), schema).alias("r"), col("message_id")).select("r.*", "message_id") \
            .write.mode("append").parquet(str(workdir / "results"))

    query = (spark.readStream.format("queueserver").option("endpoint", args.endpoint).option("queue", RESULTS)
             .option("maxMessagesPerBatch", "5000").load()
             .writeStream.foreachBatch(to_parquet).option("checkpointLocation", str(workdir / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    results = spark.read.parquet(str(workdir / "results"))
    figures.update(collect_s=round(time.monotonic() - t, 1), result_rows=results.count(),
                   distinct_items=results.select("item_id").distinct().count(),
                   dead_letters=spark.read.format("queueserver").option("endpoint", args.endpoint)
                   .option("queue", DEAD_LETTERS).load().count(),
                   total_s=round(time.monotonic() - started, 1))
    spark.stop()
    return figures


# --- the demo: start, kill, start again ---------------------------------------------------------


def start_server(db: Path) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen([sys.executable, "-m", "queueserver", "serve", "--port", "0", "--db", str(db),
                             "--log-level", "warning"], cwd=REPO_ROOT, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"queueserver did not start: {line!r}")
    return proc, line.split(" ", 1)[1]


def driver(args: argparse.Namespace, endpoint: str, name: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, __file__, "run", "--endpoint", endpoint, "--workdir", args.workdir, "--items",
               str(args.items), "--work-seconds", str(args.work_seconds), "--concurrency", str(args.concurrency),
               "--visibility-timeout", str(args.visibility_timeout), "--run-name", name, "--master", args.master]
    return subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, start_new_session=True)


def figures_of(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    out, _ = proc.communicate()
    for line in out.decode().splitlines():
        if line.startswith("FIGURES "):
            return dict(json.loads(line.split(" ", 1)[1]))
    raise SystemExit(f"the driver exited {proc.returncode} without its figures")


def demo(args: argparse.Namespace) -> int:
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="queueserver-pipeline-")
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    server, endpoint = start_server(Path(args.workdir) / "queues.db")
    try:
        sqs = ensure_queues(endpoint, args.visibility_timeout)
        work = sqs.get_queue_url(QueueName=WORK)["QueueUrl"]
        started = time.monotonic()
        first = driver(args, endpoint, "first")
        target = int(args.items * args.kill_at)
        while True:  # kill once the queue's backlog shows that much work deleted
            time.sleep(0.2)
            a = sqs.get_queue_attributes(QueueUrl=work, AttributeNames=["All"])["Attributes"]
            left = int(a["ApproximateNumberOfMessages"]) + int(a["ApproximateNumberOfMessagesNotVisible"])
            if (Path(args.workdir) / "enqueued").exists() and args.items - left >= target:
                break
            if first.poll() is not None:
                raise SystemExit("the first run ended before it could be killed; use more --items")
        for pid in [first.pid, *deployments.descendants(first.pid)]:  # the driver, its JVM and its Python workers, at once
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        first.wait()
        killed_at = round(time.monotonic() - started, 1)
        a = sqs.get_queue_attributes(QueueUrl=work, AttributeNames=["All"])["Attributes"]
        left_visible, left_in_flight = int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"])
        print(f"killed the first run after {killed_at} s: {left_visible} item(s) waiting, {left_in_flight} in flight")

        started = time.monotonic()
        second = figures_of(driver(args, endpoint, "second"))
        second["wall_s"] = round(time.monotonic() - started, 1)
        print("second run:", json.dumps(second))
        good = args.items - len(BAD_ITEMS)
        ok = second["distinct_items"] == good and second["dead_letters"] == len(BAD_ITEMS)
        print(f"items {args.items}: {second['distinct_items']} with a result, {second['dead_letters']} dead-lettered, "
              f"{second['result_rows'] - second['distinct_items']} duplicate result(s); first run killed at "
              f"{killed_at} s after {args.items - left_visible - left_in_flight} item(s), second run "
              f"{second['wall_s']} s ({second['succeeded']} item(s) done) -> {'OK' if ok else 'MISMATCH'}")
        return 0 if ok else 1
    finally:
        server.terminate()
        server.wait(timeout=15)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["demo", "run"])
    parser.add_argument("--endpoint", help="run: the queueserver (or SQS) endpoint")
    parser.add_argument("--workdir", help="where the Parquet output, the checkpoint and the marker go")
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--work-seconds", type=float, default=0.05, help="how long each item's work takes")
    parser.add_argument("--concurrency", type=int, default=4, help="handlers at once in each of the 2 tasks")
    parser.add_argument("--visibility-timeout", type=int, default=10)
    parser.add_argument("--kill-at", type=float, default=0.4, help="demo: the share of items done at the kill")
    parser.add_argument("--run-name", default="run")
    parser.add_argument("--master", default="local[2]",
                        help="where Spark runs: local[N], spark://HOST:PORT (a standalone cluster on this machine: its "
                             "executors must reach the queueserver at 127.0.0.1) or sc://HOST:PORT (Spark Connect); "
                             "queueserver.spark.deployments starts either")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "demo":
        return demo(args)
    if not args.endpoint or not args.workdir:
        parser.error("run needs --endpoint and --workdir")
    print("FIGURES " + json.dumps(run(args)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
