"""Fixtures of the durability tests: server processes that never outlive a test, and
small filesystems (tmpfs, ext4 on a loop device) to fill up or turn read-only.

Mounting needs root. These tests run as root in CI; elsewhere they skip and say why.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.clients import never_retrying_client
from support.server import Servers, sh


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    registry = Servers(log_dir)
    try:
        yield registry
    finally:
        registry.kill_all()


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60, check=False)


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small filesystem (tmpfs / loop device); CI runs these as root")


class Mounts:
    """Mount points made by a test; all unmounted at teardown, after its servers are dead."""

    def __init__(self, base: Path, servers: Servers) -> None:
        self.base = base
        self.servers = servers
        self.points: list[Path] = []
        self.loops: list[Path] = []

    def tmpfs(self, name: str, size: str) -> Path:
        require_root()
        point = self.base / name
        point.mkdir()
        sh("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(point))
        self.points.append(point)
        return point

    def ext4(self, name: str, size_mb: int = 32) -> tuple[Path, Path, str]:
        """An ext4 image on a loop device, errors=remount-ro: (mount point, image, loop device name)."""
        require_root()
        image = self.base / f"{name}.img"
        with open(image, "wb") as f:
            f.truncate(size_mb * 1024 * 1024)
        sh("mkfs.ext4", "-q", "-F", str(image))
        point = self.base / name
        point.mkdir()
        try:
            sh("mount", "-o", "loop,errors=remount-ro", str(image), str(point))
        except AssertionError as exc:
            pytest.skip(f"cannot mount an ext4 image on a loop device here: {exc}")
        self.points.append(point)
        device = sh("findmnt", "-n", "-o", "SOURCE", str(point)).strip()
        return point, image, os.path.basename(device)

    def remount(self, point: Path, options: str) -> None:
        sh("mount", "-o", f"remount,{options}", str(point))

    def umount(self, point: Path) -> None:
        sh("umount", str(point))
        self.points.remove(point)

    def cleanup(self) -> None:
        self.servers.kill_all()
        for point in reversed(self.points):
            if _run("umount", str(point)).returncode != 0:
                _run("umount", "-l", str(point))


@pytest.fixture
def mounts(tmp_path: Path, servers: Servers) -> Iterator[Mounts]:
    registry = Mounts(tmp_path, servers)
    try:
        yield registry
    finally:
        registry.cleanup()


@pytest.fixture
def sqs_client() -> Any:
    """sqs_client(endpoint, read_timeout=20) -> a boto3 client that never retries."""

    def factory(endpoint: str, read_timeout: float = 20) -> Any:
        return never_retrying_client(endpoint, read_timeout=read_timeout)

    return factory


@pytest.fixture
def as_root() -> None:
    """Skips (and .ci/run, which runs as root, never lets it) unless the test can mount filesystems."""
    require_root()


@pytest.fixture
def powercut(tmp_path: Path, servers: Servers) -> Iterator[Any]:
    """A powercut_fs.py mount at tmp_path/mnt over tmp_path/disk (see support/powercut.py); gone at teardown."""
    require_root()
    from support.powercut import PowerCutMount

    fs = PowerCutMount(tmp_path / "disk", tmp_path / "mnt", servers.log_dir)
    fs.mount()
    try:
        yield fs
    finally:
        servers.kill_all()
        fs.kill()
