"""The command line: `queueserver serve …`."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from queueserver.config import ServerConfig


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="queueserver", description="A durable SQS-compatible queue server on SQLite.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the server")
    defaults = ServerConfig()
    serve.add_argument("--db", default=defaults.db_path, help="SQLite database file (created if missing)")
    serve.add_argument("--host", default=defaults.host, help="address to listen on")
    serve.add_argument("--port", type=int, default=defaults.port, help="port to listen on; 0 picks a free one")
    serve.add_argument("--region", default=defaults.region, help="region for requests that do not sign one")
    serve.add_argument("--account-id", default=defaults.account_id, help="the account in queue URLs and ARNs")
    serve.add_argument("--test-clock", action="store_true",
                       help="run on a manual clock moved by POST /_queueserver/clock (for tests)")
    serve.add_argument("--enforce-cooldowns", action="store_true",
                       help="enforce AWS's 60-second QueueDeletedRecently and PurgeQueueInProgress rules")
    serve.add_argument("--in-flight-limit", type=int, default=defaults.in_flight_limit,
                       help="in-flight messages a standard queue allows before OverLimit")
    serve.add_argument("--fifo-in-flight-limit", type=int, default=defaults.fifo_in_flight_limit,
                       help="in-flight messages at which a FIFO queue stops delivering")
    serve.add_argument("--counts-max-age", type=float, default=defaults.counts_max_age,
                       help="seconds the approximate queue counts may lag behind changes (0: never)")
    limits = serve.add_argument_group("limits on what one client may hold (README, Limits)")
    limits.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes,
                        help="larger request bodies get 413, refused before they are read")
    limits.add_argument("--max-header-bytes", type=int, default=defaults.max_header_bytes,
                        help="the request line and headers together; more gets 431")
    limits.add_argument("--max-headers", type=int, default=defaults.max_headers, help="more headers get 431")
    limits.add_argument("--header-timeout", type=float, default=defaults.header_timeout,
                        help="seconds a connection has to send a request's headers before it is closed")
    limits.add_argument("--body-timeout", type=float, default=defaults.body_timeout,
                        help="seconds a request has to send its body before its connection is closed")
    limits.add_argument("--keep-alive-timeout", type=float, default=defaults.keep_alive_timeout,
                        help="seconds an idle connection is kept open between requests")
    limits.add_argument("--max-connections", type=int, default=defaults.max_connections,
                        help="connections beyond it are answered 503 and closed at once")
    browsers = serve.add_argument_group("browsers and host names (README, Browsers)")
    browsers.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                          help="a web origin (https://app.example.com, or *) whose browser requests are served, "
                               "with CORS; repeat or separate with commas. Others are refused")
    browsers.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                          help="a Host name requests may carry (against DNS rebinding); repeat or separate with "
                               "commas. Without it any Host is served")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    logs = serve.add_argument_group("logs (README, Operations)")
    logs.add_argument("--log-format", default=defaults.log_format, choices=["text", "json"],
                      help="json: one JSON object a line, for log shippers")
    logs.add_argument("--access-log", action="store_true", default=defaults.access_log,
                      help="a line per request: action, queue, HTTP status, duration")
    backup = commands.add_parser("backup", help="copy the database safely, also while the server runs")
    backup.add_argument("destination", help="the file to write")
    backup.add_argument("--db", default=defaults.db_path, help="the database to copy")
    check = commands.add_parser("check", help="integrity check, schema version and messages per queue")
    check.add_argument("--db", default=defaults.db_path, help="the database to check")
    from queueserver.consumer.cli import add_arguments as add_worker_arguments

    add_worker_arguments(commands.add_parser("worker", help="consume a queue with a Python handler"))
    return parser


def _split(values: list[str]) -> tuple[str, ...]:
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=getattr(args, "log_level", "warning").upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "worker":
        from queueserver.consumer.cli import run as run_worker

        return run_worker(args)
    if args.command == "serve":
        from queueserver.server import run
        from queueserver.storage.sqlite_file import StartupError

        try:
            run(ServerConfig(db_path=args.db, host=args.host, port=args.port, region=args.region,
                             account_id=args.account_id, test_clock=args.test_clock,
                             enforce_cooldowns=args.enforce_cooldowns, in_flight_limit=args.in_flight_limit,
                             fifo_in_flight_limit=args.fifo_in_flight_limit,
                             max_body_bytes=args.max_body_bytes, max_header_bytes=args.max_header_bytes,
                             max_headers=args.max_headers, header_timeout=args.header_timeout,
                             body_timeout=args.body_timeout, keep_alive_timeout=args.keep_alive_timeout,
                             max_connections=args.max_connections,
                             allowed_origins=_split(args.allow_origin), allowed_hosts=_split(args.allow_host),
                             counts_max_age=args.counts_max_age,
                             log_format=args.log_format, access_log=args.access_log))
        except StartupError as exc:
            print(f"queueserver: {exc}", file=sys.stderr)
            return 2
        return 0
    from queueserver.storage import admin
    from queueserver.storage.sqlite_file import StartupError

    try:
        if args.command == "backup":
            size = admin.backup(args.db, args.destination)
            print(f"backed up {args.db} to {args.destination} ({size} bytes)")
            return 0
        report = admin.check(args.db, time.time_ns() // 1_000_000)
    except StartupError as exc:
        print(f"queueserver: {exc}", file=sys.stderr)
        return 2
    print(f"integrity: {report.integrity}")
    print(f"schema version: {report.schema_version} (this queueserver: {report.latest_schema_version})")
    print(f"queues: {len(report.queues)}")
    for q in report.queues:
        print(f"  {q.region} {q.account} {q.name}: {q.messages} messages, {q.in_flight} in flight")
    return 0 if report.integrity == "ok" else 1
