"""The testing page's Node recipe for Testcontainers, run as printed against the image.

Testcontainers talks to a Docker API; here Podman serves one (`podman system service`, with this machine's two
settings in its containers.conf). Testcontainers' reaper container (Ryuk) is an image from Docker Hub, which no
registry here serves, so it is turned off (TESTCONTAINERS_RYUK_DISABLED): the recipe's own `stop()` removes the
container, and the test checks that none is left. The recipe's Node packages are installed once into
`.cache/testcontainers-js` (the tests never download them again).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.containers import Podman
from support.server import REPO_ROOT, wait_for

JS_CACHE = REPO_ROOT / ".cache" / "testcontainers-js"
PACKAGES = ["testcontainers@10.28.0", "@aws-sdk/client-sqs@3.1175.0"]  # pinned: the test never moves by itself
RUN_S = 180
# What the test adds after the page's recipe: a message through the SDK at the endpoint the recipe found.
SEND_AND_RECEIVE = """
import { SQSClient, CreateQueueCommand, SendMessageCommand, ReceiveMessageCommand } from "@aws-sdk/client-sqs";
const client = new SQSClient({ endpoint, region: "us-east-1",
                               credentials: { accessKeyId: "any", secretAccessKey: "any" } });
const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: "from-testcontainers" }));
await client.send(new SendMessageCommand({ QueueUrl, MessageBody: "hello" }));
const { Messages } = await client.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 5 }));
console.log(Messages[0].Body);
await sqs.stop();
"""


def _node_recipe() -> str:
    page = (REPO_ROOT / "docs" / "testing.md").read_text()
    return page.split("Node (`testcontainers`):", 1)[1].split("```js\n", 1)[1].split("```", 1)[0]


def _packages() -> Path:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.fail("node and npm are missing: install Node.js 20 or newer")
    JS_CACHE.mkdir(parents=True, exist_ok=True)
    with open(JS_CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (JS_CACHE / "node_modules" / "testcontainers").is_dir():
            subprocess.run([npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(JS_CACHE),
                            *PACKAGES], check=True, capture_output=True, timeout=600)
    return JS_CACHE


@pytest.fixture
def docker_api(podman: Podman, tmp_path: Path) -> Iterator[str]:
    """A Docker API on a unix socket, served by Podman until the test ends."""
    socket_path = tmp_path / "podman.sock"
    service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{socket_path}"],
                               env=podman.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(socket_path.exists, "podman's API socket", timeout=30, interval=0.1)
        yield f"unix://{socket_path}"
    finally:
        service.terminate()
        service.wait(timeout=30)


def test_the_node_testcontainers_recipe_waits_for_ready_and_serves_the_sdk(
        podman: Podman, image: str, docker_api: str, tmp_path: Path) -> None:
    folder = _packages() / "runs" / tmp_path.name  # below node_modules' folder, where imports find it
    folder.mkdir(parents=True, exist_ok=True)
    before = _containers_of(podman, image)
    try:
        script = folder / "recipe.mjs"
        script.write_text(_node_recipe() + SEND_AND_RECEIVE)
        env = {**os.environ, "DOCKER_HOST": docker_api, "TESTCONTAINERS_RYUK_DISABLED": "true",
               "NODE_NO_WARNINGS": "1"}
        done = subprocess.run(["node", str(script)], env=env, cwd=folder, capture_output=True, text=True,
                              timeout=RUN_S)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout == "hello\n", done.stdout
    assert _containers_of(podman, image) == before, "the recipe's stop() left its container behind"


def _containers_of(podman: Podman, image: str) -> set[str]:
    image_id = podman.run("image", "inspect", "--format", "{{.Id}}", image).stdout.strip()
    listed = podman.run("ps", "--all", "--filter", f"ancestor={image_id}", "--format", "json").stdout
    return {container["Id"] for container in json.loads(listed or "[]")}
