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
    serve.add_argument("--credentials", default=None, metavar="FILE",
                       help="TOML file of access keys; every request must then carry a valid SigV4 signature")
    serve.add_argument("--tls-cert", default=None, metavar="FILE", help="serve HTTPS with this certificate (PEM)")
    serve.add_argument("--tls-key", default=None, metavar="FILE", help="the private key of --tls-cert (PEM)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    backup = commands.add_parser("backup", help="copy the database safely, also while the server runs")
    backup.add_argument("destination", help="the file to write")
    backup.add_argument("--db", default=defaults.db_path, help="the database to copy")
    check = commands.add_parser("check", help="integrity check, schema version and messages per queue")
    check.add_argument("--db", default=defaults.db_path, help="the database to check")
    from queueserver.consumer.cli import add_arguments as add_worker_arguments

    add_worker_arguments(commands.add_parser("worker", help="consume a queue with a Python handler"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=getattr(args, "log_level", "warning").upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "worker":
        from queueserver.consumer.cli import run as run_worker

        return run_worker(args)
    if args.command == "serve":
        from queueserver.auth import CredentialsError
        from queueserver.server import run
        from queueserver.storage.sqlite_file import StartupError

        if (args.tls_cert is None) != (args.tls_key is None):
            print("queueserver: --tls-cert and --tls-key go together", file=sys.stderr)
            return 2
        try:
            run(ServerConfig(db_path=args.db, host=args.host, port=args.port, region=args.region,
                             account_id=args.account_id, test_clock=args.test_clock,
                             enforce_cooldowns=args.enforce_cooldowns, in_flight_limit=args.in_flight_limit,
                             fifo_in_flight_limit=args.fifo_in_flight_limit, credentials_path=args.credentials,
                             tls_cert=args.tls_cert, tls_key=args.tls_key))
        except CredentialsError as exc:
            print(f"queueserver: credentials file {args.credentials}: {exc}", file=sys.stderr)
            return 2
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
