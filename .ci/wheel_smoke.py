"""The built wheel as a user gets it: run from a fresh virtual environment outside the checkout.

Usage: VENV/bin/python wheel_smoke.py dist/queueserver-VERSION-py3-none-any.whl (from a folder outside the
checkout, so that nothing of the checkout can be imported; the environment has the wheel and pytest). Checks that
the installed package is the wheel's, that `queueserver --version` reports its version, that the migrations and the
console's templates are in it, that a server started from it serves a send and a receive through boto3, the
console's page and CSS, and the icon, applies every migration and stops cleanly, and that the pytest plugin,
found through its entry point, runs a user's test against a server of its own.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
import urllib.request
from importlib.metadata import entry_points
from importlib.resources import files
from pathlib import Path

CHECKS: list[str] = []
USER_TEST = """
def test_the_plugins_server_takes_a_message(queueserver, sqs):
    url = queueserver.create_queue("orders")
    sqs.send_message(QueueUrl=url, MessageBody="one")
    assert queueserver.counts(url) == {"visible": 1, "in_flight": 0, "delayed": 0}
"""


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"wheel smoke test: FAILED: {what}")
    CHECKS.append(what)


def get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=15) as response:
        return response.status, response.headers.get("content-type", ""), response.read()


def main(wheel: str) -> None:
    version = Path(wheel).name.split("-")[1]
    bin_dir = Path(sys.executable).parent
    queueserver = str(bin_dir / "queueserver")
    import queueserver as package

    check(Path(package.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()),
          f"queueserver is imported from the virtual environment ({package.__file__})")
    shown = subprocess.run([queueserver, "--version"], capture_output=True, text=True, check=True).stdout
    check(shown == f"queueserver {version}\n", f"`queueserver --version` says {shown.strip()!r}")
    migrations = sorted(p.name for p in files("queueserver.migrations").iterdir() if p.name.endswith(".sql"))
    check(len(migrations) > 0 and migrations[0].startswith("0001_"), f"{len(migrations)} migrations are packaged")
    templates = files("queueserver.console").joinpath("templates")
    check(all(templates.joinpath(t).is_file() for t in ("base.html", "overview.html", "queue.html")),
          "the console's templates are packaged")
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    check(plugins.get("queueserver") == "queueserver.testing.plugin", f"the pytest plugin is registered ({plugins})")

    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "smoke.db"
        server = subprocess.Popen([queueserver, "serve", "--port", "0", "--db", str(db)], cwd=folder,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            ready = re.fullmatch(r"READY (http://127\.0\.0\.1:\d+)\n", server.stdout.readline())
            check(ready is not None, "the server prints its READY line")
            assert ready is not None
            endpoint = ready.group(1)
            import boto3

            sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="any",
                               aws_secret_access_key="any")
            url = sqs.create_queue(QueueName="smoke")["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody="from the wheel")
            received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", [])
            check([m["Body"] for m in received] == ["from the wheel"], "a message sent through boto3 is received")
            status, kind, body = get(endpoint + "/console/static/console.css")
            check(status == 200 and kind.startswith("text/css") and b"--accent" in body, "the console's CSS is served")
            status, kind, body = get(endpoint + "/console/")
            check(status == 200 and kind.startswith("text/html") and b"<h1>Queues</h1>" in body and b"smoke" in body,
                  "the console's overview template is rendered")
            status, kind, body = get(endpoint + "/favicon.ico")
            check(status == 200 and body[:4] == b"\x00\x00\x01\x00", "the icon is served")
        finally:
            server.send_signal(signal.SIGTERM)
            rc = server.wait(timeout=30)
            stderr = server.stderr.read() if server.stderr else ""
        check(rc == 0, f"the server stops cleanly on SIGTERM (rc={rc}; stderr: {stderr[-500:]})")
        report = subprocess.run([queueserver, "check", "--db", str(db)], capture_output=True, text=True).stdout
        latest = int(migrations[-1].split("_")[0])
        check(f"schema version: {latest} (this queueserver: {latest})" in report and "integrity: ok" in report,
              f"every migration is applied ({report.strip()!r})")
        (Path(folder) / "test_user.py").write_text(USER_TEST)
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
                             cwd=folder, capture_output=True, text=True)
        check(run.returncode == 0, f"a user's test runs on the plugin's fixtures:\n{run.stdout}\n{run.stderr}")
    print(f"wheel smoke test: queueserver {version}, {len(CHECKS)} checks passed")


if __name__ == "__main__":
    main(sys.argv[1])
