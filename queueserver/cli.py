"""The command line: `queueserver serve …`, `backup`, `check`, `restore`, `worker` and the admin commands."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from queueserver import __version__
from queueserver.admin_cli import COMMANDS as ADMIN_COMMANDS
from queueserver.admin_cli import add_commands as add_admin_commands
from queueserver.admin_cli import run as run_admin
from queueserver.admin_cli.output import counted
from queueserver.config import ServerConfig
from queueserver.config_sources import add_options, load
from queueserver.errors import ConfigError, CredentialsError, StartupError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="queueserver", description="A durable SQS-compatible queue server on SQLite.")
    parser.add_argument("--version", action="version", version=f"queueserver {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the server",
                                epilog="every option is also a config file key and a QUEUESERVER_* variable "
                                       "(docs: Configuration)")
    add_options(serve)
    db = os.environ.get("QUEUESERVER_DB", ServerConfig().db_path)  # the server's, in a container too
    backup = commands.add_parser("backup", help="copy the database safely, also while the server runs")
    backup.add_argument("destination", help="the file to write")
    backup.add_argument("--db", default=db, help="the database to copy (default: $QUEUESERVER_DB, else %(default)s)")
    check = commands.add_parser("check", help="integrity check, schema version and messages per queue")
    check.add_argument("--db", default=db, help="the database to check (default: $QUEUESERVER_DB, else %(default)s)")
    restore = commands.add_parser("restore", help="bring a database back from its replica (Litestream), then check "
                                                  "it; never over an existing database")
    restore.add_argument("--from", dest="source", required=True, metavar="URL",
                         help="the replica: a folder, file://, s3://BUCKET/PATH or sftp://USER@HOST/PATH")
    restore.add_argument("--db", required=True, help="the database file to create")
    restore.add_argument("--replica-endpoint", metavar="URL", help="an S3-compatible store's URL (s3:// replicas)")
    restore.add_argument("--replica-key", metavar="FILE", help="the SSH private key (sftp:// replicas)")
    restore.add_argument("--replica-host-key", metavar="FILE", help="the sftp server's public host key")
    from queueserver.consumer.cli import add_arguments as add_worker_arguments

    add_worker_arguments(commands.add_parser("worker", help="consume a queue with a Python handler"))
    add_admin_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # refused with the command's own usage, which lists what it takes (exit 2)
        _command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "serve":
        return _serve(args)
    if args.command in ADMIN_COMMANDS:
        return run_admin(args)
    logging.basicConfig(level=getattr(args, "log_level", "warning").upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "worker":
        from queueserver.consumer.cli import run as run_worker

        return run_worker(args)
    from queueserver.storage import admin

    try:
        if args.command == "restore":
            _restore(args)
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
        print(f"  {q.region} {q.account} {q.name}: {counted(q.messages, 'message')}, {q.in_flight} in flight")
    return 0 if report.integrity == "ok" else 1


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """A command's own parser, from the subparsers action argparse keeps among the parser's actions."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[command]


def _restore(args: argparse.Namespace) -> None:
    """Litestream's restore into a path where no database is (nor a server), then on to `check`."""
    import tempfile
    from pathlib import Path

    from queueserver import replication
    from queueserver.storage.sqlite_file import lock_file

    path = os.path.realpath(args.db)
    target = replication.replica(args.source, args.replica_endpoint, args.replica_key,
                                 host_key_path=args.replica_host_key)
    program = replication.binary()
    for leftover in (path, f"{path}-wal", f"{path}-shm"):
        if os.path.exists(leftover):
            if leftover == path:
                lock_file(path).close()  # a live database: "another queueserver is already serving" it
            raise StartupError(f"{leftover} exists: restore never overwrites a database; choose a new path "
                               "or move the old files away")
    with tempfile.TemporaryDirectory(prefix="queueserver-restore-") as folder:
        replication.restore(program, replication.write_config(Path(folder), path, target), path)
    print(f"restored {path} from {replication.public_url(target.url)}")


def _serve(args: argparse.Namespace) -> int:
    """Exit 2 with one line on stderr if the settings, the config file or the database cannot be used."""
    from queueserver.server import run

    try:
        config = load(vars(args), os.environ)
    except ConfigError as exc:
        print(f"queueserver: {exc}", file=sys.stderr)
        return 2
    if (config.tls_cert is None) != (config.tls_key is None):
        print("queueserver: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    try:
        config.metrics_address
    except ConfigError as exc:
        print(f"queueserver: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run(config)
    except CredentialsError as exc:
        print(f"queueserver: credentials file {config.credentials_path}: {exc}", file=sys.stderr)
        return 2
    except (StartupError, ConfigError) as exc:
        print(f"queueserver: {exc}", file=sys.stderr)
        return 2
    return 0
