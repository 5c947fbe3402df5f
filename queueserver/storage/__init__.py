"""The storage layer: every SQL statement lives here, behind QueueEngine."""

from queueserver.storage.engine import QueueEngine

__all__ = ["QueueEngine"]
