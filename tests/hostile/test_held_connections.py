"""What a client holds open cannot hold the server: an upgrade request, a reader that never reads its
answers, and one address opening every connection. Each against a real server process; the slots
are read back from /metrics and the memory from /proc."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from support.metrics import scrape
from support.net import answered, connect, read_until_closed, status_of
from support.server import wait_for

pytestmark = pytest.mark.server_process


def _open_connections(endpoint: str) -> float:
    """Connections open now, the scrape's own included."""
    return scrape(endpoint).value("queueserver_connections_open")


UPGRADE = (b"GET /anything HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


@pytest.mark.parametrize("listener", ["main", "metrics"])
def test_an_upgrade_request_is_refused_at_the_door_and_its_slot_comes_back(server_factory, tmp_path, listener):
    limit = 5
    server = server_factory(tmp_path / "upgrade.db", "--max-connections", str(limit), "--metrics-listen",
                            "127.0.0.1:0")
    from support.metrics import metrics_address

    target = server.endpoint if listener == "main" else metrics_address(server)
    for _ in range(3 * limit):
        with connect(target) as sock:
            sock.sendall(UPGRADE)
            response = read_until_closed(sock)
        assert status_of(response) == 400, response[:300]
        assert b"connection: close" in response.lower()
    # every upgrade's slot is back: the scrape's own connection is the only one open, on both listeners
    wait_for(lambda: _open_connections(server.endpoint) == 1, "the upgrades' slots to come back", 10)
    assert _open_connections(metrics_address(server)) == 1
    assert "Unsupported upgrade" not in server.stderr_text()
