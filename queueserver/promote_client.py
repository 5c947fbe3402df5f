"""`queueserver promote`: the admin request that makes a standby the primary.

A POST of the standby's promotion path, signed with SigV4 (service "sqs") by the credentials
found the usual way, as every admin command is: with credentials on, the standby accepts only
a key marked admin = true. Exit 0 once the server answers that it is the primary (also when it
already was, so an orchestrator may retry), 1 if it refused, 3 if it could not be reached.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

from queueserver.admin_cli.client import SQS_ERROR, UNREACHABLE
from queueserver.extensions import PROMOTE_PATH

TIMEOUT_SECONDS = 120  # the check of a large copy and the engine's start happen before the answer


def promote(endpoint: str, region: str) -> int:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    from botocore.session import Session

    url = endpoint.rstrip("/") + PROMOTE_PATH
    # Keys from the environment or the AWS config files; never the EC2 metadata service, whose lookup
    # (timing out where there is none) would add seconds to a failover.
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    credentials = Session().get_credentials() or Credentials("queueserver", "queueserver")
    request = AWSRequest(method="POST", url=url, data=b"", headers={"Content-Type": "application/json"})
    SigV4Auth(credentials.get_frozen_credentials(), "sqs", region).add_auth(request)
    prepared = request.prepare()
    http = urllib.request.Request(url, data=b"", headers=dict(prepared.headers), method="POST")
    try:
        with urllib.request.urlopen(http, timeout=TIMEOUT_SECONDS) as response:
            answer = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        said = exc.read().decode("utf-8", "replace")
        print(f"queueserver: {endpoint} refused the promotion ({exc.code}): {_message(said)}", file=sys.stderr)
        return SQS_ERROR
    except (urllib.error.URLError, OSError) as exc:
        print(f"queueserver: could not reach {endpoint}: {exc}", file=sys.stderr)
        return UNREACHABLE
    print(f"{endpoint}: {answer.get('message', 'promoted')}; the primary, writing generation {answer.get('generation')}")
    return 0


def _message(said: str) -> str:
    try:
        return str(json.loads(said).get("message", said))
    except (ValueError, AttributeError):
        return said.strip()
