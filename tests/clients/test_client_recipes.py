"""The docs' client recipes run as printed, each against a real server of its own.

docs/clients.md and docs/getting-started.md include these files from docs/snippets/ (and the README shows the
first two), so what a reader copies is what runs here; the one change is the address: the docs' server is on
127.0.0.1:9324, the test's on a free port. Every recipe runs in a fresh environment: no AWS configuration,
no AWS_* variables, a home folder of its own, as on a machine that never saw AWS.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from support.server import REPO_ROOT, wait_for

pytestmark = pytest.mark.server_process

SNIPPETS = REPO_ROOT / "docs" / "snippets"
DOCS_ADDRESS = "127.0.0.1:9324"
BIN = Path(sys.executable).parent  # aws, celery and dramatiq come with the test extra
JS_SDK = "@aws-sdk/client-sqs@3.1175.0"  # the SDK's current line, pinned: the test never moves by itself
JS_CACHE = REPO_ROOT / ".cache" / "js-sdk"
RUN_S = 120


@pytest.fixture
def recipe_server(server_factory: Any, tmp_path: Path) -> Any:
    return server_factory(tmp_path / "recipes.db", "--test-clock")


@pytest.fixture
def fresh_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "PATH": f"{BIN}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin",
            "LANG": "C.UTF-8"}


def recipe(name: str, server: Any, folder: Path) -> Path:
    """The snippet, written into `folder` with the test server's address for the docs'."""
    text = (SNIPPETS / name).read_text()
    assert DOCS_ADDRESS in text, f"docs/snippets/{name} no longer talks to {DOCS_ADDRESS}"
    path = folder / name
    path.write_text(text.replace(DOCS_ADDRESS, urlsplit(server.endpoint).netloc))
    return path


def run(command: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=RUN_S)
    assert done.returncode == 0, f"{command} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


class Output:
    """A long-running process's output (stdout and stderr together), read as it comes."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.text = ""
        self.proc = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.text += line

    def wait_for(self, pattern: str) -> re.Match[str]:
        found = wait_for(lambda: re.search(pattern, self.text) or self.proc.poll() is not None, repr(pattern),
                         timeout=RUN_S, detail=lambda: self.text)
        assert isinstance(found, re.Match), f"the process ended (rc={self.proc.returncode}):\n{self.text}"
        return found

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def test_the_boto3_recipe_sends_and_receives(recipe_server: Any, fresh_env: dict[str, str], tmp_path: Path) -> None:
    script = recipe("boto3_first_message.py", recipe_server, tmp_path)
    assert run([sys.executable, str(script)], fresh_env, tmp_path) == "hello\n"


def test_the_aws_cli_recipe_works_with_no_aws_configuration(recipe_server: Any, fresh_env: dict[str, str],
                                                             tmp_path: Path) -> None:
    script = recipe("aws_cli.sh", recipe_server, tmp_path)
    out = run(["bash", "-eu", str(script)], fresh_env, tmp_path)
    assert out.endswith("\nhello\n") and f'"QueueUrl": "{recipe_server.endpoint}/000000000000/cli-jobs"' in out


def _javascript_sdk() -> Path:
    """The folder holding @aws-sdk/client-sqs, installed with npm on first use (one install at a time)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are missing: install Node.js 20 or newer (apt-get install nodejs npm)")
    JS_CACHE.mkdir(parents=True, exist_ok=True)
    with open(JS_CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (JS_CACHE / "node_modules" / "@aws-sdk" / "client-sqs").is_dir():
            subprocess.run([npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(JS_CACHE), JS_SDK],
                           check=True, capture_output=True, timeout=600)
    return JS_CACHE


def test_the_javascript_sdk_recipe_sends_and_receives(recipe_server: Any, fresh_env: dict[str, str],
                                                      tmp_path: Path) -> None:
    folder = _javascript_sdk() / "runs" / tmp_path.name  # below node_modules' folder, where imports find it
    folder.mkdir(parents=True, exist_ok=True)
    try:
        script = recipe("javascript_sdk.mjs", recipe_server, folder)
        env = {**fresh_env, "PATH": f"{Path(shutil.which('node') or 'node').parent}{os.pathsep}{fresh_env['PATH']}",
               "NODE_NO_WARNINGS": "1"}
        assert run(["node", str(script)], env, folder) == "hello from JavaScript\n"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_kombu_recipe_puts_and_gets_a_message(recipe_server: Any, fresh_env: dict[str, str],
                                                  tmp_path: Path) -> None:
    script = recipe("kombu_queue.py", recipe_server, tmp_path)
    assert run([sys.executable, str(script)], fresh_env, tmp_path) == "{'order': 42}\n"


def test_a_celery_worker_runs_the_task_the_recipe_sends(recipe_server: Any, fresh_env: dict[str, str],
                                                        tmp_path: Path) -> None:
    recipe("celery_tasks.py", recipe_server, tmp_path)
    run([sys.executable, "celery_tasks.py"], fresh_env, tmp_path)  # sends add(2, 3)
    worker = Output([str(BIN / "celery"), "-A", "celery_tasks", "worker", "--pool", "solo", "--loglevel", "INFO"],
                    fresh_env, tmp_path)
    try:
        worker.wait_for(r"Task celery_tasks\.add\[[0-9a-f-]+\] succeeded in [0-9.e-]+s: 5\n")
    finally:
        worker.stop()


def test_a_dramatiq_worker_runs_the_actor_the_recipe_sends_to(recipe_server: Any, fresh_env: dict[str, str],
                                                              tmp_path: Path) -> None:
    recipe("dramatiq_tasks.py", recipe_server, tmp_path)
    run([sys.executable, "dramatiq_tasks.py"], fresh_env, tmp_path)  # sends greet("Dramatiq")
    worker = Output([str(BIN / "dramatiq"), "dramatiq_tasks", "--processes", "1", "--threads", "1"], fresh_env,
                    tmp_path)
    try:
        worker.wait_for(r"(?m)^hello, Dramatiq$")
    finally:
        worker.stop()
