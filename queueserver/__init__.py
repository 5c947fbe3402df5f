"""queueserver: a durable Amazon SQS-compatible queue server that keeps every message in SQLite."""

from importlib.metadata import PackageNotFoundError, version

try:  # pyproject.toml's version is the one source; the installed distribution carries it
    __version__ = version("queueserver")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"
