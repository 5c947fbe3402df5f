"""queueserver: a durable Amazon SQS-compatible queue server that keeps every message in SQLite."""

__version__ = "0.1.0"
