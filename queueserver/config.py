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


_LIMITS = "limits on what one client may hold (README, Limits)"
_BROWSERS = "browsers and host names (README, Browsers)"


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
    max_header_bytes: int = setting(16 * 1024, "the request line and headers together; more gets 431", group=_LIMITS)
    max_headers: int = setting(100, "more headers get 431", group=_LIMITS)
    header_timeout: float = setting(10.0, "seconds a connection has to send a request's headers before it is "
                                          "closed", group=_LIMITS)
    body_timeout: float = setting(30.0, "seconds a request has to send its body before its connection is closed",
                                  group=_LIMITS)
    keep_alive_timeout: float = setting(5.0, "seconds an idle connection is kept open between requests",
                                        group=_LIMITS)
    max_connections: int = setting(1000, "connections beyond it are answered 503 and closed at once", group=_LIMITS)
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
    # The web console under /console (README, "Web console"): None is on when listening on loopback only.
    console: bool | None = setting(None, "the web console under /console (default: on when --host is a loopback "
                                         "address)")
    # Logs (README, "Operations"): "text" or "json" lines, and an access log line per request.
    log_format: str = setting("text", "json: one JSON object a line, for log shippers", choices=("text", "json"))
    access_log: bool = setting(False, "a line per request: action, queue, HTTP status, duration")
    # Not a setting: the [queues.*] tables of the config file.
    queues: tuple[QueueDeclaration, ...] = field(default=(), metadata={"file_only": True})

    @property
    def console_enabled(self) -> bool:
        """With --credentials the console asks for an access key and secret (README, "Web console")."""
        if self.console is not None:
            return self.console
        return self.host in ("127.0.0.1", "::1", "localhost") or self.host.startswith("127.")
