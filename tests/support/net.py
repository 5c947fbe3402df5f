"""Raw sockets and /proc readings for the hostile-client tests (Linux)."""

from __future__ import annotations

import os
import select
import socket
from urllib.parse import urlparse


def address(endpoint: str) -> tuple[str, int]:
    parsed = urlparse(endpoint)
    assert parsed.hostname is not None and parsed.port is not None
    return parsed.hostname, parsed.port


def connect(endpoint: str, timeout: float = 10) -> socket.socket:
    sock = socket.create_connection(address(endpoint), timeout=timeout)
    return sock


def read_until_closed(sock: socket.socket, timeout: float = 10) -> bytes:
    """Everything the server sends until it closes the connection (fails the test after TIMEOUT)."""
    sock.settimeout(timeout)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def answered(sock: socket.socket) -> bool:
    """Has the server sent something (or closed)? Does not block."""
    return bool(select.select([sock], [], [], 0)[0])


def status_of(response: bytes) -> int:
    assert response.startswith(b"HTTP/1.1 "), response[:200]
    return int(response.split(b" ", 2)[1])


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (the peak) of a process, from /proc/PID/status."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                values[name] = int(rest.split()[0])
    return values


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def server_end_open(endpoint: str, client_port: int) -> bool:
    """Does the server still hold its end of the loopback connection from CLIENT_PORT (Linux /proc/net/tcp)?
    Its end is open until the server closes it (established, or close-wait once the client has gone)."""
    server_port = address(endpoint)[1]
    with open("/proc/net/tcp") as table:
        for line in list(table)[1:]:
            fields = line.split()
            local_port, remote_port = (int(field.rsplit(":", 1)[1], 16) for field in fields[1:3])
            if (local_port, remote_port) == (server_port, client_port) and fields[3] in ("01", "08"):
                return True
    return False
