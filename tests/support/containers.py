"""Podman as a user's Docker: the README's container lines, this machine's two settings (tests/container).

The README's two container lines run as written, with only what this kind of machine adds (and a user's Docker or
Podman needs none of): the build gets the machine's CA bundle for pip and `--format docker` (Podman's default
format drops HEALTHCHECK); every podman command runs with `--runtime runc` and a containers.conf whose
`default_ulimits = []` (crun refuses this kernel's hybrid cgroups; the runtime's setrlimit is refused here).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import uuid
from pathlib import Path

from support.server import REPO_ROOT

CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
STEP_S = 60


def readme_container_lines() -> list[str]:
    """The README's container lines: the sh block after `<!-- readme-container -->`, comments aside."""
    text = (REPO_ROOT / "README.md").read_text()
    marker = "<!-- readme-container -->\n```sh\n"
    assert marker in text, "the README has no container block"
    block = text.split(marker, 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


class Podman:
    """podman with this machine's two settings; every container and volume it made is removed at the end."""

    def __init__(self, folder: Path) -> None:
        conf = folder / "containers.conf"
        # The runtime also here, for what runs containers without the command line: podman's API service.
        conf.write_text('[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n')
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        self.containers: list[str] = []
        self.volumes: list[str] = []

    def command(self, args: list[str]) -> list[str]:
        """A `docker …` command line as this machine's podman runs it."""
        assert args[0] == "docker", args
        if args[1] == "build":
            return ["podman", "build", "--format", "docker", "--pull=never", "--network=host",
                    "--volume", f"{CA_BUNDLE}:/host-ca.crt:ro", "--env", "PIP_CERT=/host-ca.crt", *args[2:]]
        return ["podman", "--runtime", "runc", *args[1:]]

    def run(self, *args: str, timeout: float = STEP_S, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.command(["docker", *args]), env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=REPO_ROOT)
        if check:
            assert done.returncode == 0, f"podman {shlex.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    def name(self, kind: str) -> str:
        made = f"queueserver-test-{kind}-{uuid.uuid4().hex[:8]}"
        (self.volumes if kind == "data" else self.containers).append(made)
        return made

    def clean(self) -> None:
        for container in self.containers:
            self.run("rm", "--force", "--ignore", container, check=False)
        for volume in self.volumes:
            self.run("volume", "rm", "--force", volume, check=False)
