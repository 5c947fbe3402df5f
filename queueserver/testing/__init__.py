"""Restart-safe testing against a real queueserver: a process handle and a pytest plugin.

`QueueServer` works without pytest (a context manager for unittest and scripts). The pytest
plugin in `queueserver.testing.plugin` is registered through the `pytest11` entry point, so
installing queueserver is all a user does; `-p no:queueserver` turns it off. The project's own
tests and benchmarks start their servers through it too.
"""

from queueserver.testing.process import QueueServerError
from queueserver.testing.server import QueueServer, StartAttempt

__all__ = ["QueueServer", "QueueServerError", "StartAttempt"]
