"""`queueserver worker package.module:handler --queue NAME`, run as a real subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.server import REPO_ROOT
from support.sqs import send_bodies, visible_and_in_flight
from support.workers import WAIT_TIMEOUT_S, wait_for

HERE = Path(__file__).resolve().parent


def worker_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment with no AWS settings of the machine's: no credentials, no config files, no IMDS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(HERE)]),
        "PYTHONUNBUFFERED": "1",
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "RECORD_FILE": str(tmp_path / "handled.txt"),
    })
    env.update(extra)
    return env


def start_cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "queueserver", "worker", "cli_handlers:record", *args],
                            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def handled(tmp_path: Path) -> list[str]:
    path = tmp_path / "handled.txt"
    return path.read_text().splitlines() if path.exists() else []


def stop_cli(proc: subprocess.Popen[str], server_clock: Any) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGTERM)
    server_clock.advance(20)  # end the worker's long poll now rather than after its wait time
    try:
        out, err = proc.communicate(timeout=WAIT_TIMEOUT_S * 2)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the worker did not exit after SIGTERM:\n{err}") from None
    return proc.returncode, out, err


def test_the_worker_command_handles_messages_and_exits_0_after_a_clean_shutdown_on_sigterm(
        worker_sqs, make_worker_queue, server_clock, worker_endpoint, tmp_path):
    url = make_worker_queue()
    name = url.rsplit("/", 1)[1]
    env = worker_env(tmp_path, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
    proc = start_cli(env, "--queue", name, "--endpoint", worker_endpoint, "--visibility-timeout", "60",
                     "--concurrency", "2")
    try:
        send_bodies(worker_sqs, url, ["one", "two", "three"])
        wait_for(lambda: sorted(handled(tmp_path)) == ["one", "three", "two"], "three messages handled")
        wait_for(lambda: visible_and_in_flight(worker_sqs, url) == (0, 0), "the deletes")
    finally:
        rc, out, err = stop_cli(proc, server_clock)
    assert rc == 0, err
    assert out == "", "the worker writes nothing to stdout"
    assert "SIGTERM: shutting down gracefully" in err


def test_the_worker_command_takes_its_endpoint_from_the_environment_and_needs_no_credentials_for_it(
        worker_sqs, make_worker_queue, server_clock, worker_endpoint, tmp_path):
    url = make_worker_queue()
    env = worker_env(tmp_path, AWS_ENDPOINT_URL_SQS=worker_endpoint)
    proc = start_cli(env, "--queue", url.rsplit("/", 1)[1])
    try:
        send_bodies(worker_sqs, url, ["from the environment"])
        wait_for(lambda: handled(tmp_path) == ["from the environment"], "the message handled")
        wait_for(lambda: visible_and_in_flight(worker_sqs, url) == (0, 0), "the delete")
    finally:
        rc, _, err = stop_cli(proc, server_clock)
    assert rc == 0, err


def test_the_worker_command_exits_2_when_the_queue_does_not_exist(worker_endpoint, tmp_path):
    env = worker_env(tmp_path, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
    proc = start_cli(env, "--queue", "no-such-queue", "--endpoint", worker_endpoint)
    _, err = proc.communicate(timeout=WAIT_TIMEOUT_S * 2)
    assert proc.returncode == 2
    assert "cannot start the worker" in err


def test_the_worker_command_with_a_3_second_visibility_timeout_alone_starts_and_handles_messages(
        worker_sqs, make_worker_queue, server_clock, worker_endpoint, tmp_path):
    url = make_worker_queue()
    env = worker_env(tmp_path, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
    proc = start_cli(env, "--queue", url.rsplit("/", 1)[1], "--endpoint", worker_endpoint,
                     "--visibility-timeout", "3")
    try:
        send_bodies(worker_sqs, url, ["short visibility"])
        wait_for(lambda: handled(tmp_path) == ["short visibility"], "the message handled")
        wait_for(lambda: visible_and_in_flight(worker_sqs, url) == (0, 0), "the delete")
    finally:
        rc, _, err = stop_cli(proc, server_clock)
    assert rc == 0, err


def test_the_worker_command_refuses_an_explicit_threshold_above_the_visibility_timeout_clearly(
        make_worker_queue, worker_endpoint, tmp_path):
    env = worker_env(tmp_path, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
    proc = start_cli(env, "--queue", make_worker_queue().rsplit("/", 1)[1], "--endpoint", worker_endpoint,
                     "--visibility-timeout", "3", "--extension-threshold", "5")
    _, err = proc.communicate(timeout=WAIT_TIMEOUT_S * 2)
    assert proc.returncode == 2
    assert "extension_threshold must be > 0 and at most visibility_timeout (3 s), not 5 s" in err
