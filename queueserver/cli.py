"""The command line: `queueserver serve …`, `backup`, `check`, `restore`, `worker` and the admin commands."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import TYPE_CHECKING

from queueserver import __version__
from queueserver.admin_cli import COMMANDS as ADMIN_COMMANDS
from queueserver.admin_cli import add_commands as add_admin_commands
from queueserver.admin_cli import run as run_admin
from queueserver.admin_cli.output import counted
from queueserver.config import ServerConfig
from queueserver.config_sources import add_options, load
from queueserver.errors import ConfigError, CredentialsError, StartupError

if TYPE_CHECKING:
    from queueserver.replication import Replica


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="queueserver", description="A durable SQS-compatible queue server on SQLite.")
    parser.add_argument("--version", action="version", version=f"queueserver {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the server",
                                epilog="every option is also a config file key and a QUEUESERVER_* variable "
                                       "(docs: Configuration)")
    add_options(serve)
    standby = commands.add_parser("standby", help="follow a replica (read-only) until promoted, then serve",
                                  epilog="takes serve's options; promoted, it replicates to the next generation "
                                         "of --from (docs: Operations, Failover)")
    standby.add_argument("--from", dest="standby_from", required=True, metavar="URL",
                         help="the primary's replica: a folder, file://, s3://BUCKET/PATH or sftp://USER@HOST/PATH")
    add_options(standby)
    promote = commands.add_parser("promote", help="make a running standby the primary (an admin request)")
    promote.add_argument("--endpoint", default="http://127.0.0.1:9324", help="the standby's URL (default %(default)s)")
    promote.add_argument("--region", default=os.environ.get("AWS_REGION", "us-east-1"),
                         help="the region its signature names, with credentials on (default: $AWS_REGION, us-east-1)")
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
    restore.add_argument("--db", help="the database file to create (not with --list)")
    restore.add_argument("--at", metavar="TIME", help="the database as it was at this time (ISO 8601, UTC unless it "
                                                      "says: 2026-01-01T12:00:00Z): the newest restore point before it")
    restore.add_argument("--list", action="store_true", help="list the restore points the replica holds, restore nothing")
    restore.add_argument("--generation", type=int, metavar="N", help="the replica generation to read (default: the "
                                                                     "newest; an older one holds the time before a "
                                                                     "failover)")
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
    if args.command in ("serve", "standby"):
        return _serve(args)
    if args.command == "promote":
        from queueserver.promote_client import promote

        return promote(args.endpoint, args.region)
    if args.command in ADMIN_COMMANDS:
        return run_admin(args)
    logging.basicConfig(level=getattr(args, "log_level", "warning").upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "worker":
        from queueserver.consumer.cli import run as run_worker

        return run_worker(args)
    from queueserver.storage import admin

    try:
        if args.command == "restore" and args.list:
            return _list_points(args)
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
    from queueserver.replication import points
    from queueserver.storage.sqlite_file import lock_file, make_private, sync_folder

    if args.db is None:
        raise StartupError("restore needs --db PATH, the database file to create")
    if os.path.islink(args.db):  # even a dangling one: the restore would land wherever it points
        raise StartupError(f"{args.db} is a symbolic link: restore creates a new file at a path that is not one")
    path = os.path.realpath(args.db)
    program = replication.binary()
    target = _newest_generation(program, args)
    moment = None if args.at is None else points.parse_moment(args.at)
    for leftover in (path, f"{path}-wal", f"{path}-shm"):
        if os.path.lexists(leftover):
            if leftover == path:
                lock_file(path).close()  # a live database: "another queueserver is already serving" it
            raise StartupError(f"{leftover} exists: restore never overwrites a database; choose a new path "
                               "or move the old files away")
    private = os.umask(0o077)  # Litestream creates the files: readable by this user alone, whatever its umask
    try:
        with tempfile.TemporaryDirectory(prefix="queueserver-restore-") as folder:
            config = replication.write_config(Path(folder), path, target)
            point = None if moment is None else points.point_before(points.restore_points(program, target),
                                                                     moment)
            replication.restore(program, config, path, None if point is None else point.hex_txid)
    finally:
        os.umask(private)
    make_private(path)
    sync_folder(path)
    when = "" if point is None else f" as it was at {point.second.isoformat()} (transaction {point.hex_txid})"
    print(f"restored {path} from {replication.public_url(target.url)}{when}")


def _newest_generation(program: str, args: argparse.Namespace) -> Replica:
    """The replica of --from, at --generation, else at its newest (where the latest promoted primary writes)."""
    from queueserver import replication
    from queueserver.replication import generations

    base = replication.replica(args.source, args.replica_endpoint, args.replica_key,
                               host_key_path=args.replica_host_key)
    if args.generation is not None and args.generation < 0:
        raise StartupError(f"--generation {args.generation}: expected 0 or more")
    chosen = generations.newest(program, base) if args.generation is None else args.generation
    return generations.generation_replica(base, chosen)


def _list_points(args: argparse.Namespace) -> int:
    """`restore --list`: one line per point the replica can restore to, oldest first."""
    from queueserver import replication
    from queueserver.replication import points

    program = replication.binary()
    target = _newest_generation(program, args)
    found = points.restore_points(program, target)
    for point in found:
        print(f"{point.second.isoformat().replace('+00:00', 'Z')}  transaction {point.hex_txid}")
    if not found:
        print(f"no restore points in {replication.public_url(target.url)}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    """Exit 2 with one line on stderr if the settings, the config file or the database cannot be used."""
    from queueserver.server import run

    options = dict(vars(args))
    if options.pop("standby_from", None) is not None:  # a standby follows --from, and replicates there promoted
        options["replicate"] = args.standby_from
    try:
        config = load(options, os.environ)
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
        run(config, standby=args.command == "standby")
    except CredentialsError as exc:
        print(f"queueserver: credentials file {config.credentials_path}: {exc}", file=sys.stderr)
        return 2
    except (StartupError, ConfigError) as exc:
        print(f"queueserver: {exc}", file=sys.stderr)
        return 2
    return 0
