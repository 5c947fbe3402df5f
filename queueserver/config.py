"""The server's settings, fixed at start-up."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerConfig:
    db_path: str = "queueserver.db"
    host: str = "127.0.0.1"
    port: int = 9324
    region: str = "us-east-1"
    account_id: str = "000000000000"
    test_clock: bool = False
    # AWS's two 60-second rules (QueueDeletedRecently, PurgeQueueInProgress).
    enforce_cooldowns: bool = False
    # SQS's in-flight quotas; settings so that tests can reach them with a few messages.
    in_flight_limit: int = 120_000
    fifo_in_flight_limit: int = 120_000
    # How stale the approximate queue counts may be, in seconds (see storage/count_cache.py).
    counts_max_age: float = 1.0
    # What one client may hold (README, "Limits"). The body allows SQS's 1 MiB payload in its
    # widest encoding (3 bytes a byte, percent-encoded or \u-escaped) plus the envelope.
    max_body_bytes: int = 4 * 1024 * 1024
    max_header_bytes: int = 16 * 1024  # the request line and all headers
    max_headers: int = 100
    header_timeout: float = 10.0  # from the first byte of a request (or the connect) to its last header
    body_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    max_connections: int = 1000
    # Browser safety (README, "Browsers"): origins whose requests are served, with CORS;
    # Host names served (empty: any).
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    # Logs (README, "Operations"): "text" or "json" lines, and an access log line per request.
    log_format: str = "text"
    access_log: bool = False
