"""The test suite's one support package: everything a test needs besides its fixtures.

- server.py: the queueserver process (queueserver.testing's QueueServer, failing the test when a
  start fails), `Servers` that never outlive a test, the test clock (`ClockControl`), waits;
- clients.py: boto3's JSON client, the Query/XML client, the never-retrying crash-tier client;
- sqs.py: SQS's error checks, MD5s, unique names, queue counts, receives, drains, ARNs, redrive;
- wire.py: hand-made requests in both protocols (JSON, Query form POST and GET) and their reading;
- metrics.py, net.py: /metrics, /health and /ready; raw sockets and /proc readings;
- one kit per tier: auth, dead_letters, fifo, fifo_history, subscriptions, workers, spark,
  faults and powercut (with powercut_fs.py, the FUSE filesystem it mounts);
- moto.py: moto's server, a second SQS (and the S3 of the replication tests) for any tier;
  sftp.py: Debian's sshd on loopback, for an sftp:// replica;
- containers.py: Podman as a user's Docker, with this machine's settings, for the image's tests.

pyproject puts tests/ on pytest's path, so `from support.sqs import counts` works
from every folder and in every import mode.
"""
