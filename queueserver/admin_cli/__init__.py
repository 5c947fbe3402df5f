"""The admin CLI: `queueserver queues|queue|send|receive|peek|redrive|stats|subscription(s)` against a running
server.

A client of the SQS API through boto3 (so it works against AWS SQS too, except `peek` and
subscriptions, queueserver extensions), never of the storage: it imports neither the storage nor the
protocol layer. boto3 and rich are imported only when a command runs, so that `serve`
does not pay for them.
"""

from queueserver.admin_cli.commands import COMMANDS, add_commands, run

__all__ = ["COMMANDS", "add_commands", "run"]
