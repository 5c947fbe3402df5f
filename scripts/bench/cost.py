"""Instructions per request under callgrind, and the cost guard of CI.

valgrind's callgrind counts the instructions the server executes (every thread), which do not
move with the machine's load: a change of a few per cent shows. The server runs pinned to core 0
under callgrind (about 50 times slower); one client connection sends the requests one after the
other, so that group commit always commits one request (a count that does not depend on timing).
Each scenario is warmed up first (caches, prepared statements), then its counters are zeroed and
`--requests` requests counted; the least of `--rounds` rounds is kept (noise only adds).

Scenarios (thousands of instructions per request; a receive and its delete are two requests):
  send                    SendMessage, 100-byte body
  send_batch10            SendMessageBatch of 10
  receive_delete          ReceiveMessage of 1 + DeleteMessage
  receive10_delete_batch  ReceiveMessage of 10 + DeleteMessageBatch
  send_subscribed         SendMessage to a queue with one subscription
  send_signed             SendMessage with credentials on, every request signed with SigV4
  publish_raw             SNS Publish to a topic with one subscribed queue, raw delivery
  publish_envelope        SNS Publish to a topic with one subscribed queue, the signed JSON envelope

The budgets are committed in scripts/bench/budgets.toml, one line per scenario with the revision
it was measured on. `--check` fails (exit 1) when a scenario is more than 3 % over its budget and
prints the table; `--write-budgets` measures and rewrites the file (a lower budget is committed
with the change that earns it).

    python scripts/bench cost                          # measure and print
    python scripts/bench cost --check                  # the CI step
    python scripts/bench cost --write-budgets          # re-measure every budget
    python scripts/bench cost --check --figures F.toml # compare figures measured before (budgets' format)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from queueserver.extensions import CREATE_SUBSCRIPTION_ACTION
from queueserver.testing import QueueServer

SCENARIOS = ("send", "send_batch10", "receive_delete", "receive10_delete_batch", "send_subscribed", "send_signed",
             "publish_raw", "publish_envelope")
# An SNS request's signature scope names its service; with credentials off the signature is not checked.
SNS_AUTHORIZATION = ("AWS4-HMAC-SHA256 Credential=cost/20260101/us-east-1/sns/aws4_request, SignedHeaders=host, "
                     "Signature=0")
BUDGETS = Path(__file__).with_name("budgets.toml")
TOLERANCE = 0.03
BODY = "x" * 100
KEY_ID, SECRET, ACCOUNT = "AKIDCOSTGUARD", "cost-guard-secret", "123456789012"
FIELDS = {"kinstructions", "measured_on"}


# --- the budgets file ------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    kinstructions: float
    measured_on: str


def read_figures(path: Path) -> dict[str, Figure]:
    """The budgets file (or figures saved in its format); a file that is not exactly that is refused."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SystemExit(f"{path}: {exc}") from None
    problems = [f"unknown scenario {name!r}" for name in data if name not in SCENARIOS]
    problems += [f"no figure for {name}" for name in SCENARIOS if name not in data]
    figures = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or set(entry) != FIELDS:
            problems.append(f"{name}: expected {{ kinstructions = NUMBER, measured_on = \"REVISION\" }}")
            continue
        value, revision = entry["kinstructions"], entry["measured_on"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            problems.append(f"{name}: kinstructions must be a positive number, not {value!r}")
        elif not isinstance(revision, str) or not revision:
            problems.append(f"{name}: measured_on must name a revision")
        else:
            figures[name] = Figure(float(value), revision)
    if problems:
        raise SystemExit(f"{path}: " + "; ".join(problems))
    return figures


def format_figures(figures: dict[str, Figure]) -> str:
    lines = ["# Thousands of instructions per request under callgrind (`python scripts/bench cost`), each with",
             "# the revision it was measured on. CI fails a scenario more than 3 % over its line; a change",
             "# that lowers one rewrites its line in the same commit (`python scripts/bench cost --write-budgets`)."]
    lines += [f'{name} = {{ kinstructions = {figures[name].kinstructions:.1f}, measured_on = '
              f'"{figures[name].measured_on}" }}' for name in SCENARIOS if name in figures]
    return "\n".join(lines) + "\n"


def compare(budgets: dict[str, Figure], measured: dict[str, Figure],
            tolerance: float = TOLERANCE) -> tuple[str, list[str]]:
    """The table (scenario, budget, measured, ratio) and the scenarios over budget by more than `tolerance`."""
    rows = ["| scenario | budget | measured | ratio |", "|---|---:|---:|---:|"]
    over = []
    for name in SCENARIOS:
        if name not in measured:
            continue
        budget, got = budgets[name].kinstructions, measured[name].kinstructions
        ratio = got / budget
        flag = ""
        if ratio > 1 + tolerance:
            over.append(name)
            flag = " **over**"
        rows.append(f"| {name} | {budget:.1f} | {got:.1f} | {ratio:.3f}{flag} |")
    return "\n".join(rows), over


# --- measuring ---------------------------------------------------------------------------


class Client:
    """One keep-alive connection speaking AWS JSON 1.0; with `sign`, every request carries SigV4."""

    def __init__(self, endpoint: str, sign: bool = False) -> None:
        self.endpoint = endpoint
        host, port = endpoint.removeprefix("http://").rsplit(":", 1)
        self._conn = http.client.HTTPConnection(host, int(port), timeout=600)
        self._signer: Any = None
        if sign:
            from botocore.auth import SigV4Auth
            from botocore.credentials import Credentials

            self._signer = SigV4Auth(Credentials(KEY_ID, SECRET), "sqs", "us-east-1")

    def call(self, action: str, members: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(members, separators=(",", ":")).encode()
        headers = {"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0"}
        if self._signer is not None:
            from botocore.awsrequest import AWSRequest

            request = AWSRequest(method="POST", url=self.endpoint + "/", data=body, headers=headers)
            self._signer.add_auth(request)
            headers = dict(request.headers.items())
        self._conn.request("POST", "/", body, headers)
        response = self._conn.getresponse()
        answer = response.read()
        if response.status != 200:
            raise SystemExit(f"{action}: {response.status} {answer[:300]!r}")
        return dict(json.loads(answer)) if answer else {}

    def sns(self, params: dict[str, str]) -> str:
        """An SNS Query request (unsigned: the publish scenarios run with credentials off); the XML answer."""
        self._conn.request("POST", "/", urlencode({**params, "Version": "2010-03-31"}), {
            "Content-Type": "application/x-www-form-urlencoded", "Authorization": SNS_AUTHORIZATION})
        response = self._conn.getresponse()
        answer = response.read().decode()
        if response.status != 200:
            raise SystemExit(f"{params['Action']}: {response.status} {answer[:300]!r}")
        return answer

    def close(self) -> None:
        self._conn.close()


class Callgrind:
    """The instruction counters of a process run under valgrind's callgrind (`python scripts/bench cpu
    --callgrind` reads them too): zeroed, then dumped and read. Every dump is a new file beside the
    first (DUMPS.PID, DUMPS.PID.1, ...), so the newest holds the count since the last zero."""

    def __init__(self, dumps: Path) -> None:
        self.dumps = dumps

    def command(self) -> list[str]:
        """What runs the process under callgrind, put before its own command."""
        return ["valgrind", "--tool=callgrind", "--quiet", f"--callgrind-out-file={self.dumps}.%p"]

    def zero(self, pid: int) -> None:
        subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)

    def kinstructions(self, pid: int) -> float:
        """Thousands of instructions since the last zero."""
        subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
        newest = max(self.dumps.parent.glob(f"{self.dumps.name}.*"), key=lambda f: f.stat().st_mtime_ns)
        with open(newest) as dump:
            summary = next(line for line in dump if line.startswith(("summary:", "totals:")))
        return int(summary.split()[1]) / 1e3


class CountedServer:
    """A queueserver under callgrind, pinned to core 0 where there are two cores; its counters on demand."""

    def __init__(self, folder: Path, extra_args: list[str]) -> None:
        self.callgrind = Callgrind(folder / "cg")
        pin = ["taskset", "-c", "0"] if shutil.which("taskset") and len(_cores()) > 1 else []
        self.server = QueueServer(folder / "cost.db", test_clock=True, ready_timeout=600, env={"PYTHONHASHSEED": "0"},
                                  extra_args=["--log-level", "warning", *extra_args],
                                  run_under=[*pin, *self.callgrind.command()])

    def zero(self) -> None:
        self.callgrind.zero(self.server.pid)

    def kinstructions(self) -> float:
        return self.callgrind.kinstructions(self.server.pid)


def _cores() -> set[int]:
    return os.sched_getaffinity(0)


def prepare(client: Client, name: str) -> str:
    """The scenario's queue (with its subscription, for send_subscribed); returns its URL."""
    url = str(client.call("CreateQueue", {"QueueName": f"cost-{name.replace('_', '-')}"})["QueueUrl"])
    if name == "send_subscribed":
        client.call(CREATE_SUBSCRIPTION_ACTION, {"QueueUrl": url, "SubscriptionName": "audit"})
    if name.startswith("publish"):  # the topic's ARN stands for the URL: a topic with this one queue subscribed
        topic = client.sns({"Action": "CreateTopic", "Name": f"cost-{name.replace('_', '-')}"})
        arn = topic.split("<TopicArn>", 1)[1].split("</TopicArn>", 1)[0]
        client.sns({"Action": "Subscribe", "TopicArn": arn, "Protocol": "sqs", "Endpoint": f"arn:aws:sqs:"
                    f"us-east-1:000000000000:{url.rpartition('/')[2]}", "Attributes.entry.1.key": "RawMessageDelivery",
                    "Attributes.entry.1.value": "true" if name == "publish_raw" else "false"})
        return arn
    return url


def requests_of(client: Client, name: str, url: str) -> Callable[[int], None]:
    """`run(n)`: n requests of the scenario (a receive scenario's queue is filled beforehand, uncounted)."""

    def run(n: int) -> None:
        if name in ("send", "send_subscribed", "send_signed"):
            for _ in range(n):
                client.call("SendMessage", {"QueueUrl": url, "MessageBody": BODY})
        elif name == "send_batch10":
            entries = [{"Id": str(i), "MessageBody": BODY} for i in range(10)]
            for _ in range(n):
                client.call("SendMessageBatch", {"QueueUrl": url, "Entries": entries})
        elif name.startswith("publish"):
            for _ in range(n):
                client.sns({"Action": "Publish", "TopicArn": url, "Message": BODY})
        elif name == "receive_delete":
            for _ in range(n // 2):
                got = client.call("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 1})["Messages"]
                client.call("DeleteMessage", {"QueueUrl": url, "ReceiptHandle": got[0]["ReceiptHandle"]})
        else:
            for _ in range(n // 2):
                got = client.call("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10})["Messages"]
                client.call("DeleteMessageBatch", {"QueueUrl": url, "Entries": [
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]})

    return run


def fill(client: Client, url: str, messages: int) -> None:
    entries = [{"Id": str(i), "MessageBody": BODY} for i in range(10)]
    for _ in range(-(-messages // 10)):
        client.call("SendMessageBatch", {"QueueUrl": url, "Entries": entries})


def measure_scenarios(counted: CountedServer, scenarios: list[str], requests: int, warmup: int, rounds: int,
                      sign: bool, say: Callable[[str], None]) -> dict[str, list[float]]:
    """Every round of every scenario on one server: k-instructions per request."""
    client = Client(counted.server.endpoint, sign=sign)
    results: dict[str, list[float]] = {}
    try:
        for name in scenarios:
            url = prepare(client, name)
            run = requests_of(client, name, url)
            if name.startswith("receive"):
                per_pair = 10 if name == "receive10_delete_batch" else 1
                fill(client, url, (warmup + rounds * requests) // 2 * per_pair + 10)
            run(warmup)
            for _ in range(rounds):
                counted.zero()
                run(requests)
                results.setdefault(name, []).append(counted.kinstructions() / requests)
            say(f"{name}: " + " ".join(f"{v:.1f}" for v in results[name]))
    finally:
        client.close()
    return results


def measure(scenarios: list[str], requests: int, warmup: int, rounds: int,
            say: Callable[[str], None]) -> dict[str, list[float]]:
    """The unsigned scenarios on one server and the signed one on another, the two at once."""
    folder = Path(tempfile.mkdtemp(prefix="queueserver-cost-"))
    results: dict[str, list[float]] = {}
    failures: list[BaseException] = []
    try:
        keys = folder / "keys.toml"
        keys.write_text(f'[keys.{KEY_ID}]\nsecret_access_key = "{SECRET}"\naccount_id = "{ACCOUNT}"\n')
        plans = [(folder / "open", [s for s in scenarios if s != "send_signed"], [], False),
                 (folder / "signed", [s for s in scenarios if s == "send_signed"], ["--credentials", str(keys)], True)]

        def one(where: Path, names: list[str], args: list[str], sign: bool) -> None:
            where.mkdir()
            counted = CountedServer(where, args)
            try:
                with counted.server:
                    results.update(measure_scenarios(counted, names, requests, warmup, rounds, sign, say))
            except BaseException as exc:  # reported by the caller, with the server's log
                failures.append(exc)

        threads = [threading.Thread(target=one, args=plan) for plan in plans if plan[1]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return results


def revision() -> str:
    """The revision measured: `git describe --always --dirty` (a dirty tree is the commit that follows)."""
    done = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                          cwd=Path(__file__).parent, check=False)
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/bench cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", type=lambda s: s.split(","), default=list(SCENARIOS),
                        help="comma-separated, of: " + ", ".join(SCENARIOS))
    parser.add_argument("--requests", type=int, default=200, help="requests counted per round (default 200)")
    parser.add_argument("--warmup", type=int, default=60, help="requests before counting (default 60)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per scenario; the least is kept (default 2)")
    parser.add_argument("--budgets", type=Path, default=BUDGETS, help="the budgets file (default: beside this)")
    parser.add_argument("--figures", type=Path, help="compare these figures (the budgets' format), measure none")
    parser.add_argument("--save", type=Path, help="also write the figures measured to this file")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="fail when a scenario is over its budget by > 3 %%")
    what.add_argument("--write-budgets", action="store_true", help="measure and rewrite the budgets file")
    args = parser.parse_args(argv)
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenarios: {', '.join(unknown)}")
    if args.figures is not None:
        measured = read_figures(args.figures)
    else:
        if shutil.which("valgrind") is None:
            raise SystemExit("valgrind is missing (apt-get install valgrind)")
        rounds = measure(args.scenarios, args.requests, args.warmup, args.rounds,
                         lambda line: print(line, file=sys.stderr, flush=True))
        spread = {name: max(values) / min(values) - 1 for name, values in rounds.items()}
        print("spread between rounds: " + ", ".join(f"{n} {v:.2%}" for n, v in spread.items()), file=sys.stderr)
        measured_on = revision()
        measured = {name: Figure(min(values), measured_on) for name, values in rounds.items()}
    if args.save is not None:
        args.save.write_text(format_figures(measured))
    if args.write_budgets:
        previous = read_figures(args.budgets) if args.budgets.exists() else {}
        args.budgets.write_text(format_figures({**previous, **measured}))
        print(f"wrote {args.budgets}")
    if args.check or args.figures is not None:
        table, over = compare(read_figures(args.budgets), measured)
        print(f"thousands of instructions per request under callgrind, budgets from {args.budgets}:")
        print(table)
        if over:
            print(f"FAILED: {', '.join(over)} more than {TOLERANCE:.0%} over budget. A change that needs the cost "
                  f"raises the budget in its own commit and says why.")
            return 1
        print(f"passed: every scenario within {TOLERANCE:.0%} of its budget")
        return 0
    if not args.write_budgets:
        print(format_figures(measured), end="")
    return 0
