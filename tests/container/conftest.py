"""The container image (the top-level Dockerfile), built and run with Podman as a user runs it with Docker.

Every test here carries the `container` marker, which the default `pytest` run deselects and `.ci/run` selects in
a step of its own (`python -m pytest -m container tests/container`), once Podman, runc and a local
`debian:bookworm-slim` are there (tests/support/containers.py: the settings this machine adds). These tests never
skip: without Podman they fail. The published ports and the volumes' names are each test's own, so a server on
9324 or a user's volume is never touched; every container and volume made is removed at the end.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from collections.abc import Iterator

import pytest
from support.containers import Podman, readme_container_lines
from support.server import REPO_ROOT

BUILD_S = 900
CONTAINER_DIR = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/container `container` before `-m` selects (tryfirst); the hook sees
    every collected item, so only this folder's are marked."""
    for item in items:
        if CONTAINER_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.container)


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    tool = Podman(tmp_path_factory.mktemp("podman"))
    version = subprocess.run(["podman", "--version"], capture_output=True, text=True, check=False)
    assert version.returncode == 0, "podman is missing: apt-get install podman runc (.ci/run installs them)"
    yield tool
    tool.clean()


@pytest.fixture(scope="session")
def image(podman: Podman) -> str:
    """The image, built by the README's build line (the image's name is the one that line gives)."""
    build = next(shlex.split(line) for line in readme_container_lines() if line.startswith("docker build "))
    done = subprocess.run(podman.command(build), env=podman.env, capture_output=True, text=True, timeout=BUILD_S,
                          cwd=REPO_ROOT)
    assert done.returncode == 0, f"the build failed\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return build[build.index("-t") + 1]
