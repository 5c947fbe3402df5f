"""Debian's OpenSSH server on a free loopback port, for the sftp:// replica: keys made for the test.

sshd needs root (its privilege separation) and the openssh-server package; .ci/run installs it.
Without it the test fails and says so: a skip here would pass for a tested sftp replica.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.server import end_process, free_port, wait_for

SSHD = "/usr/sbin/sshd"
READY_TIMEOUT_S = 15.0


@dataclass
class SftpServer:
    port: int
    client_key: Path  # the private key that logs in as root
    host_key: Path  # the server's public host key (.pub)

    def url(self, folder: Path) -> str:
        return f"sftp://root@127.0.0.1:{self.port}{folder}"

    def options(self) -> list[str]:
        return ["--replica-key", str(self.client_key), "--replica-host-key", str(self.host_key)]


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
        return sock.recv(4).startswith(b"SSH-")
    return False


@contextlib.contextmanager
def sftp_server(folder: Path) -> Iterator[SftpServer]:
    if not os.path.exists(SSHD) or shutil.which("ssh-keygen") is None:
        pytest.fail("the sftp replica needs Debian's openssh-server: apt-get install openssh-server (.ci/run does)")
    if os.geteuid() != 0:
        pytest.skip("sshd needs root (privilege separation); CI runs these as root")
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
    port = free_port()
    config = folder / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {folder / 'host_key'}", f"PidFile {folder / 'sshd.pid'}",
        f"AuthorizedKeysFile {folder / 'authorized_keys'}", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "StrictModes no", "UsePAM no",
        "Subsystem sftp internal-sftp", ""]))
    Path("/run/sshd").mkdir(exist_ok=True)  # its privilege separation directory
    log = folder / "sshd.log"
    with open(log, "wb") as output:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=output,
                                stderr=subprocess.STDOUT)
    try:
        def listening() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"sshd exited at start (port {port}):\n{log.read_text(errors='replace')}")
            return _listening(port)

        wait_for(listening, f"sshd to listen on port {port}", timeout=READY_TIMEOUT_S, interval=0.05,
                 detail=lambda: log.read_text(errors="replace"))
        yield SftpServer(port, folder / "client_key", folder / "host_key.pub")
    finally:
        end_process(proc)
