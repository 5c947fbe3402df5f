"""Replication: Litestream streams the database to a replica beside the server, and restores from one.

The `replicate` extra installs Litestream; nothing here runs without `--replicate`.
"""

from queueserver.replication.litestream import Replica, binary, replica, restore, write_config
from queueserver.replication.status import ReplicationReport, ReplicationStatus
from queueserver.replication.supervisor import Replicator, public_url

__all__ = ["Replica", "ReplicationReport", "ReplicationStatus", "Replicator", "binary", "public_url", "replica",
           "restore", "write_config"]
