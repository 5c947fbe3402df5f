"""The image as users run it: the README's lines, a volume that outlives its container, SIGTERM, the health state."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from botocore.exceptions import ClientError

from support.clients import json_client
from support.containers import Podman, readme_container_lines
from support.server import REPO_ROOT, free_port, wait_for

READY_S = 60
README_PORT = "127.0.0.1:9324:9324"
README_VOLUME = "queueserver-data:/data"


def _logs(podman: Podman, container: str) -> str:
    done = podman.run("logs", container, check=False)
    return done.stdout + done.stderr


def _wait_ready(podman: Podman, container: str) -> str:
    """Wait for the server's READY line; returns the container's output so far."""
    def ready() -> str | None:
        text = _logs(podman, container)
        return text if "READY " in text else None

    return wait_for(ready, f"{container} to print READY", timeout=READY_S, interval=0.2,
                    detail=lambda: _logs(podman, container))


def _stop_with_sigterm(podman: Podman, container: str) -> int:
    podman.run("kill", "--signal", "TERM", container)
    return int(podman.run("wait", container, timeout=45).stdout.strip())


def _readme_run_line(podman: Podman, port: int) -> list[str]:
    """The README's run line, with a free loopback port, a volume and a name of this test's own."""
    line = shlex.split(next(line for line in readme_container_lines() if line.startswith("docker run ")))
    assert README_PORT in line and README_VOLUME in line, f"the README's run line changed: {shlex.join(line)}"
    line[line.index(README_PORT)] = f"127.0.0.1:{port}:9324"
    line[line.index(README_VOLUME)] = f"{podman.name('data')}:/data"
    return [*line[:2], "--name", podman.name("readme"), *line[2:]]


def test_the_readmes_two_lines_build_an_image_that_serves_boto3_on_a_published_loopback_port(
        podman: Podman, image: str) -> None:
    port = free_port()
    line = _readme_run_line(podman, port)
    name = line[line.index("--name") + 1]
    server = subprocess.Popen(podman.command(line), env=podman.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        _wait_ready(podman, name)
        sqs = json_client(f"http://127.0.0.1:{port}")
        url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="hello")
        received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
        assert [m["Body"] for m in received] == ["hello"]
        assert _stop_with_sigterm(podman, name) == 0
        output, _ = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.returncode == 0, output
    assert "database closed" in output, output


def test_a_second_container_on_the_same_volume_receives_what_the_first_left_after_sigterm(
        podman: Podman, image: str, tmp_path: Path) -> None:
    config = tmp_path / "queueserver.toml"
    config.write_text('log_level = "info"\n\n[queues.orders]\nVisibilityTimeout = 60\n')
    config.chmod(0o644)
    volume, port = podman.name("data"), free_port()
    first = podman.name("first")
    # A config file mounted read-only, and serve's options as arguments after the image's name.
    podman.run("run", "-d", "--name", first, "-p", f"127.0.0.1:{port}:9324", "-v", f"{volume}:/data",
               "-v", f"{config}:/etc/queueserver.toml:ro", image, "--config", "/etc/queueserver.toml",
               "--log-format", "json")
    started = _wait_ready(podman, first)
    assert any(json.loads(line).get("message", "").startswith("no --credentials") for line in started.splitlines()
               if line.startswith("{")), started
    sqs = json_client(f"http://127.0.0.1:{port}")
    url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]  # declared in the mounted file
    for body in ("one", "two", "three"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    taken = sqs.receive_message(QueueUrl=url)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=taken[0]["ReceiptHandle"])

    assert podman.run("healthcheck", "run", first).returncode == 0
    assert podman.run("inspect", "--format", "{{.State.Health.Status}}", first).stdout.strip() == "healthy"
    assert _stop_with_sigterm(podman, first) == 0
    assert "database closed" in _logs(podman, first)

    second, port = podman.name("second"), free_port()
    podman.run("run", "-d", "--name", second, "-p", f"127.0.0.1:{port}:9324", "-v", f"{volume}:/data", image)
    _wait_ready(podman, second)
    sqs = json_client(f"http://127.0.0.1:{port}")
    url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]
    left = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]
    assert sorted(m["Body"] for m in left) == sorted({"one", "two", "three"} - {taken[0]["Body"]})
    assert _stop_with_sigterm(podman, second) == 0


def test_the_server_inside_runs_as_a_user_that_is_not_root_with_the_database_in_the_volume(
        podman: Podman, image: str) -> None:
    shown = json.loads(podman.run("image", "inspect", image).stdout)[0]["Config"]
    assert shown["User"] == "queueserver"
    assert "/data" in shown["Volumes"] and "9324/tcp" in shown["ExposedPorts"]
    assert shown["Entrypoint"] == ["queueserver", "serve"]
    assert "QUEUESERVER_DB=/data/queueserver.db" in shown["Env"]
    assert "QUEUESERVER_HOST=0.0.0.0" in shown["Env"]


def test_the_compose_file_serves_the_image_on_loopback_with_its_volume_and_its_own_health_check(
        podman: Podman, image: str) -> None:
    service = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())["services"]["queueserver"]
    check = json.loads(podman.run("image", "inspect", image).stdout)[0]["Healthcheck"]
    assert service["image"] == image and service["ports"] == ["127.0.0.1:9324:9324"]
    assert service["volumes"] == ["queueserver-data:/data"]
    assert service["healthcheck"]["test"] == check["Test"]


def test_with_credentials_the_image_refuses_an_unknown_key_and_its_health_check_still_passes(
        podman: Podman, image: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys.AKIDCONTAINER]\nsecret_access_key = "container-secret"\naccount_id = "111111111111"\n')
    keys.chmod(0o644)  # the image's user (uid 10001) reads it
    name, port = podman.name("credentials"), free_port()
    podman.run("run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:9324", "-v", f"{podman.name('data')}:/data",
               "-v", f"{keys}:/etc/queueserver/keys.toml:ro", image, "--credentials", "/etc/queueserver/keys.toml")
    _wait_ready(podman, name)
    endpoint = f"http://127.0.0.1:{port}"
    url = json_client(endpoint, aws_access_key_id="AKIDCONTAINER",
                      aws_secret_access_key="container-secret").create_queue(QueueName="signed")["QueueUrl"]
    assert url == f"{endpoint}/111111111111/signed"
    with pytest.raises(ClientError) as refused:
        json_client(endpoint, aws_access_key_id="AKIDNOBODY", aws_secret_access_key="x").list_queues()
    assert refused.value.response["Error"]["Code"] == "InvalidClientTokenId"
    assert podman.run("healthcheck", "run", name).returncode == 0  # /ready needs no signature
    assert _stop_with_sigterm(podman, name) == 0
