"""Run a real older boto3, one that still speaks the SQS Query protocol, against a queueserver.

    python scripts/old_client_check.py --endpoint http://127.0.0.1:PORT

botocore 1.31.80 is the last release whose SQS model is protocol "query" (1.31.81 switched SQS to
JSON). The first run (or `--prepare`, which .ci/run calls before the tests) creates a virtual environment
under the repo's `.cache/` and installs boto3 1.28.80 with botocore 1.31.80 into it from the
package registry; later runs reuse it (`--no-install`, as the tests run it, refuses to download). The
script then re-runs itself with that environment's Python (`--run`), where it does a
send/receive/delete/attributes/tags/permissions/batch/error round trip with the client and the
resource API, checking every request it sends is a Query request. Exit status 0 means it passed.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

BOTO3 = "boto3==1.28.80"
BOTOCORE = "botocore==1.31.80"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VENV = REPO_ROOT / ".cache" / "old-boto3-1.28.80"
STAMP = "queueserver-ready"


# -- the environment (runs with the project's Python) -------------------------------


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _usable(venv: Path) -> bool:
    if not (venv / STAMP).exists() or (venv / STAMP).read_text().strip() != f"{BOTO3} {BOTOCORE}":
        return False
    probe = subprocess.run([str(_python(venv)), "-c", "import boto3, botocore; print(botocore.__version__)"],
                           capture_output=True, text=True, check=False)
    return probe.returncode == 0 and probe.stdout.strip() == BOTOCORE.split("==")[1]


def ensure_venv(venv: Path) -> Path:
    """The cached environment with the old boto3, built (under a lock) if missing or broken."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _usable(venv):
            return venv
        building = venv.with_name(f"{venv.name}.building-{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(building)], check=True)
        install = subprocess.run(
            [str(_python(building)), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
             "--quiet", BOTO3, BOTOCORE],
            capture_output=True, text=True, check=False)
        if install.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            raise SystemExit(f"pip could not install {BOTO3} {BOTOCORE}:\n{install.stdout}\n{install.stderr}")
        (building / STAMP).write_text(f"{BOTO3} {BOTOCORE}\n")
        shutil.rmtree(venv, ignore_errors=True)
        building.rename(venv)
        # a venv's scripts name their own path; the interpreter itself does not, so `bin/python` works
        if not _usable(venv):
            raise SystemExit(f"the environment at {venv} does not import {BOTOCORE}")
        return venv


# -- the round trip (runs with the old boto3's Python) ------------------------------


def check(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


def round_trip(endpoint: str) -> str:
    import boto3
    import botocore
    from botocore.config import Config
    from botocore.exceptions import ClientError

    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test",
                                    region_name="us-east-1")
    config = Config(retries={"max_attempts": 1})
    sqs = session.client("sqs", endpoint_url=endpoint, config=config)
    check(sqs.meta.service_model.protocol == "query", f"botocore {botocore.__version__} does not speak Query")
    bodies: list[str] = []

    def record(request: Any, **_: Any) -> None:
        body = request.body
        bodies.append(body.decode() if isinstance(body, bytes) else (body or ""))

    sqs.meta.events.register("before-send.sqs", record)

    name = f"old-client-{uuid.uuid4().hex[:10]}"
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "30", "DelaySeconds": "0"},
                           tags={"client": "old-boto3"})["QueueUrl"]
    check(url.endswith(f"/{name}"), f"queue URL {url}")
    check(sqs.get_queue_url(QueueName=name)["QueueUrl"] == url, "GetQueueUrl")
    check(url in sqs.list_queues(QueueNamePrefix=name)["QueueUrls"], "ListQueues")

    # attributes
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "20"})
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    check(attributes["VisibilityTimeout"] == "20", f"attributes {attributes}")
    check(attributes["QueueArn"].endswith(f":{name}"), "QueueArn")

    # tags and permissions
    sqs.tag_queue(QueueUrl=url, Tags={"env": "test"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["client"])
    check(sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"env": "test"}, "tags")
    sqs.add_permission(QueueUrl=url, Label="p", AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    check("Policy" in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"], "policy")
    sqs.remove_permission(QueueUrl=url, Label="p")

    # send, receive, change visibility, delete
    body = "old client \r\n body \U0001F600 <&>"
    message_attributes = {"text": {"DataType": "String", "StringValue": "v\r1"},
                          "count": {"DataType": "Number", "StringValue": "42"},
                          "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"}}
    sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=message_attributes)
    check(sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest(), "MD5OfMessageBody")
    [message] = sqs.receive_message(QueueUrl=url, AttributeNames=["All"], MessageAttributeNames=["All"],
                                    WaitTimeSeconds=0)["Messages"]
    check(message["Body"] == body, f"body {message['Body']!r}")
    check(message["MessageAttributes"] == message_attributes, f"attributes {message['MessageAttributes']}")
    check(message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"], "MD5OfMessageAttributes")
    check(message["Attributes"]["ApproximateReceiveCount"] == "1", "ApproximateReceiveCount")
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    [again] = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])["Messages"]
    check(again["Attributes"]["ApproximateReceiveCount"] == "2", "received again")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    check("Messages" not in sqs.receive_message(QueueUrl=url), "deleted")

    # batches, with an entry failing in-band
    sent_batch = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": f"e{i}", "MessageBody": f"batch {i}"} for i in range(3)] + [
        {"Id": "bad", "MessageBody": "x", "DelaySeconds": 901}])
    check(sorted(e["Id"] for e in sent_batch["Successful"]) == ["e0", "e1", "e2"], f"batch {sent_batch}")
    check([(f["Id"], f["SenderFault"]) for f in sent_batch["Failed"]] == [("bad", True)], "batch failure")
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    check(sorted(m["Body"] for m in messages) == ["batch 0", "batch 1", "batch 2"], "batch receive")
    changed = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 60} for i, m in enumerate(messages)])
    check(len(changed["Successful"]) == 3, "visibility batch")
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)] + [
        {"Id": "stale", "ReceiptHandle": "not-a-handle"}])
    check(len(deleted["Successful"]) == 3, f"delete batch {deleted}")
    check(deleted["Failed"][0]["Code"] == "ReceiptHandleIsInvalid", f"delete batch failure {deleted}")

    # the resource API of the same boto3
    queue = session.resource("sqs", endpoint_url=endpoint, config=config).Queue(url)
    queue.send_message(MessageBody="via resource")
    [resource_message] = queue.receive_messages(MaxNumberOfMessages=1)
    check(resource_message.body == "via resource", "resource receive")
    resource_message.delete()
    queue.purge()

    # errors: the legacy codes, as modeled exceptions
    try:
        sqs.get_queue_url(QueueName=f"{name}-missing")
        raise AssertionError("GetQueueUrl of a missing queue succeeded")
    except sqs.exceptions.QueueDoesNotExist as error:
        check(error.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue", str(error.response))
        check(error.response["Error"]["Type"] == "Sender", "Type")
        check(error.response["ResponseMetadata"]["HTTPStatusCode"] == 400, "status")
    try:
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "same", "MessageBody": "x"}] * 2)
        raise AssertionError("a batch with repeated ids succeeded")
    except sqs.exceptions.BatchEntryIdsNotDistinct as error:
        check(error.response["Error"]["Code"] == "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "batch ids")
    try:
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "5"})
        raise AssertionError("a create with other attributes succeeded")
    except ClientError as error:
        check(error.response["Error"]["Code"] == "QueueAlreadyExists", str(error.response))

    sqs.delete_queue(QueueUrl=url)
    check(all(b.startswith("Action=") for b in bodies), "a request was not a Query request")
    return (f"old client round trip OK: boto3 {boto3.__version__}, botocore {botocore.__version__}, "
            f"protocol query, {len(bodies)} requests")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="the queueserver URL, e.g. http://127.0.0.1:9324")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="where the old boto3 is installed")
    parser.add_argument("--prepare", action="store_true",
                        help="only build the environment (from the package registry), for .ci/run to do before the tests")
    parser.add_argument("--no-install", action="store_true",
                        help="fail instead of installing if the environment is not ready (the tests never download)")
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)  # inside the old environment
    args = parser.parse_args()
    if args.prepare:
        print(f"old boto3 ready in {ensure_venv(args.venv)}")
        return
    if not args.endpoint:
        parser.error("--endpoint is required")
    if args.run:
        print(round_trip(args.endpoint))
        return
    if args.no_install and not _usable(args.venv):
        raise SystemExit(f"{BOTO3} is not prepared in {args.venv}: run `python scripts/old_client_check.py --prepare` "
                         "first (.ci/run does); the tests do not download packages")
    venv = ensure_venv(args.venv)
    result = subprocess.run([str(_python(venv)), str(Path(__file__).resolve()), "--run",
                             "--endpoint", args.endpoint], check=False)
    raise SystemExit(result.returncode)


if __name__ == "__main__":
    main()
