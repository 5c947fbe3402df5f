"""The server's settings, fixed at start-up: one declaration per setting.

Each field is a setting; its metadata gives the help text and, where it differs from the
field's name, the public name. The command-line option (`--max-body-bytes`), the config
file key (`max_body_bytes`) and the environment variable (`QUEUESERVER_MAX_BODY_BYTES`)
are all derived from that one declaration (see config_sources.py), so a new field is a
new setting everywhere without more code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from queueserver.errors import ConfigError
from queueserver.extensions import MAX_SUBSCRIPTIONS
from queueserver.limits import DEFAULT_ACCOUNT, DEFAULT_REGION, IN_FLIGHT_LIMIT


def setting(default: Any, help: str, *, name: str = "", group: str = "", choices: tuple[str, ...] = (),
            metavar: str = "") -> Any:
    """A ServerConfig field with what its option, key and variable need."""
    return field(default=default, metadata={"help": help, "name": name, "group": group, "choices": choices,
                                            "metavar": metavar})


@dataclass(frozen=True)
class QueueDeclaration:
    """A queue the config file asks for: created at start if missing, updated if its attributes differ."""

    name: str
    region: str
    account: str
    attributes: dict[str, str]
    tags: dict[str, str]
    dead_letter_queue: str | None = None  # by name, in the same region and account
    max_receive_count: int | None = None


_LIMITS = "limits on what one client may hold (docs: Security, Limits)"
_BROWSERS = "browsers and host names (docs: Security, Browsers and host names)"
_REPLICATION = "replication to another machine, with Litestream (docs: Operations, Replication)"


@dataclass(frozen=True)
class ServerConfig:
    db_path: str = setting("queueserver.db", "SQLite database file (created if missing)", name="db")
    host: str = setting("127.0.0.1", "address to listen on")
    port: int = setting(9324, "port to listen on; 0 picks a free one")
    region: str = setting(DEFAULT_REGION, "region for requests that do not sign one")
    account_id: str = setting(DEFAULT_ACCOUNT, "the account in queue URLs and ARNs")
    test_clock: bool = setting(False, "run on a manual clock moved by POST /_queueserver/clock (for tests)")
    # AWS's two 60-second rules (QueueDeletedRecently, PurgeQueueInProgress).
    enforce_cooldowns: bool = setting(False, "enforce AWS's 60-second QueueDeletedRecently and "
                                             "PurgeQueueInProgress rules")
    # SQS's in-flight quotas; settings so that tests can reach them with a few messages.
    in_flight_limit: int = setting(IN_FLIGHT_LIMIT, "in-flight messages a standard queue allows before OverLimit")
    fifo_in_flight_limit: int = setting(IN_FLIGHT_LIMIT, "in-flight messages at which a FIFO queue stops delivering")
    # How stale the approximate queue counts may be (see storage/count_cache.py).
    counts_max_age: float = setting(
        2.0, "seconds the approximate counts of a big queue may lag behind changes (0: never)")
    # The body allows SQS's 1 MiB payload in its widest encoding (3 bytes a byte) plus the envelope.
    max_body_bytes: int = setting(4 * 1024 * 1024, "larger request bodies get 413, refused before they are read",
                                  group=_LIMITS)
    # The console's forms carry a few fields (a test message at most): a smaller door for what anyone may post.
    max_form_bytes: int = setting(256 * 1024, "larger console form bodies get 413 (never more than "
                                              "--max-body-bytes)", group=_LIMITS)
    max_header_bytes: int = setting(16 * 1024, "the request line and headers together; more gets 431", group=_LIMITS)
    max_headers: int = setting(100, "more headers get 431", group=_LIMITS)
    header_timeout: float = setting(10.0, "seconds a connection has to send a request's headers before it is "
                                          "closed", group=_LIMITS)
    body_timeout: float = setting(30.0, "seconds a request has to send its body before its connection is closed",
                                  group=_LIMITS)
    handshake_timeout: float = setting(5.0, "seconds a TLS connection has from its accept to finish its handshake "
                                            "before it is closed", group=_LIMITS)
    keep_alive_timeout: float = setting(5.0, "seconds an idle connection is kept open between requests",
                                        group=_LIMITS)
    max_connections: int = setting(1000, "connections beyond it are answered 503 and closed at once", group=_LIMITS)
    # So that one client cannot take every slot; loopback clients are counted like any other.
    max_connections_per_address: int | None = setting(
        None, "connections one client address may hold; more are answered 503 and closed at once. Behind a "
              "--trusted-proxy, requests in progress per forwarded address (default: half of --max-connections)",
        group=_LIMITS)
    # An answer a client does not read holds its memory and its slot; this bounds both in time.
    write_timeout: float | None = setting(
        None, "seconds an answer may wait to be read by its client before its connection is closed and its "
              "memory freed (default: three times --body-timeout)", group=_LIMITS)
    # Each subscription is a receiver every send reaches (docs: Subscriptions).
    max_subscriptions: int = setting(MAX_SUBSCRIPTIONS, "subscriptions one queue may have; one more gets OverLimit",
                                     group=_LIMITS)
    # A scrape's size and cost grow with the queues it lists one by one (2.2 KB each, 3.7 KB with long names).
    metrics_max_queues: int = setting(250, "queues with series of their own in /metrics, the first created; the "
                                           "others are summed in one series labelled queue=(other)", group=_LIMITS)
    allowed_origins: tuple[str, ...] = setting(
        (), "a web origin (https://app.example.com, or *) whose browser requests are served, with CORS; "
            "repeat or separate with commas. Others are refused", name="allow_origin", group=_BROWSERS,
        metavar="ORIGIN")
    allowed_hosts: tuple[str, ...] = setting(
        (), "a Host name requests may carry (against DNS rebinding); repeat or separate with commas. "
            "Without it any Host is served", name="allow_host", group=_BROWSERS, metavar="NAME")
    log_level: str = setting("info", "the least severe log records written", choices=("debug", "info", "warning",
                                                                                      "error"))
    # With a credentials file every request must be signed by one of its keys; without, all are accepted.
    credentials_path: str | None = setting(
        None, "TOML file of access keys; every request must then carry a valid SigV4 signature",
        name="credentials", metavar="FILE")
    tls_cert: str | None = setting(None, "serve HTTPS with this certificate (PEM)", metavar="FILE")
    tls_key: str | None = setting(None, "the private key of --tls-cert (PEM)", metavar="FILE")
    # Forwarding headers name the client and its scheme only when a proxy we trust adds them (docs: Security, Proxies).
    trusted_proxies: tuple[str, ...] = setting(
        (), "the address or network (10.0.0.0/8) of a reverse proxy whose X-Forwarded-For and X-Forwarded-Proto "
            "are believed; repeat or separate with commas. Without it they are ignored", name="trusted_proxy",
        metavar="ADDRESS")
    # A listener for a scraper that cannot sign (docs: Operations, Metrics): reached by those its address lets in.
    metrics_listen: str | None = setting(
        None, "HOST:PORT of a second listener that serves only /metrics, /health and /ready, unsigned even "
              "with --credentials (port 0 picks a free one)", metavar="HOST:PORT")
    # The web console under /console (docs: Web console): None is on when listening on loopback only.
    console: bool | None = setting(None, "the web console under /console (default: on when --host is a loopback "
                                         "address)")
    # Logs (docs: Operations, Logs): "text" or "json" lines, and an access log line per request.
    log_format: str = setting("text", "json: one JSON object a line, for log shippers", choices=("text", "json"))
    access_log: bool = setting(False, "a line per request: action, queue, HTTP status, duration")
    # Litestream beside the server (docs: Operations, Replication): off unless a replica is named.
    replicate: str | None = setting(
        None, "stream the database to this replica with Litestream (the replicate extra): a folder, file://, "
              "s3://BUCKET/PATH or sftp://USER@HOST/PATH", group=_REPLICATION, metavar="URL")
    replica_endpoint: str | None = setting(
        None, "an S3-compatible store's URL for an s3:// replica (MinIO, R2 ...); credentials come from "
              "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", group=_REPLICATION, metavar="URL")
    replica_key: str | None = setting(None, "the SSH private key of an sftp:// replica", group=_REPLICATION,
                                      metavar="FILE")
    replica_host_key: str | None = setting(
        None, "the sftp server's public host key (its .pub file): without it the host is not verified",
        group=_REPLICATION, metavar="FILE")
    replica_sync_interval: float = setting(
        1.0, "seconds between uploads to the replica: about the changes a lost machine takes with it",
        group=_REPLICATION, metavar="SECONDS")
    # Not a setting: the [queues.*] tables of the config file.
    queues: tuple[QueueDeclaration, ...] = field(default=(), metadata={"file_only": True})

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """The metrics listener's host and port; ConfigError when --metrics-listen is not HOST:PORT."""
        if self.metrics_listen is None:
            return None
        host, separator, port = self.metrics_listen.rpartition(":")
        if host.startswith("[") and host.endswith("]"):  # [::1]:9325
            host = host[1:-1]
        if not separator or not host or not port.isdigit() or int(port) > 65535:
            raise ConfigError(f"metrics_listen: expected HOST:PORT, got {self.metrics_listen!r}")
        return host, int(port)

    @property
    def connections_per_address(self) -> int:
        """--max-connections-per-address, or half of --max-connections."""
        if self.max_connections_per_address is not None:
            return self.max_connections_per_address
        return max(1, self.max_connections // 2)

    @property
    def write_deadline(self) -> float:
        """--write-timeout, or three times --body-timeout."""
        return self.write_timeout if self.write_timeout is not None else 3 * self.body_timeout

    @property
    def console_enabled(self) -> bool:
        """With --credentials the console asks for an access key and secret (docs: Web console)."""
        if self.console is not None:
            return self.console
        return self.host in ("127.0.0.1", "::1", "localhost") or self.host.startswith("127.")
