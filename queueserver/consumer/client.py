"""The boto3 SQS client the worker and the Spark source build: one rule for unsigned requests."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_REGION = "us-east-1"  # limits.DEFAULT_REGION too: the consumer imports nothing of the server


def sqs_client(session: Any, endpoint: str | None, region: str | None, config: Any) -> Any:
    """An SQS client from a boto3 session; unsigned when an endpoint is given and no credentials are found.

    A local queueserver does not check signatures, so users need not invent keys; AWS (no endpoint)
    keeps boto3's own error for missing credentials."""
    from botocore import UNSIGNED
    from botocore.config import Config

    if endpoint and session.get_credentials() is None:
        log.info("no AWS credentials found; sending unsigned requests to %s", endpoint)
        config = config.merge(Config(signature_version=UNSIGNED))
    return session.client("sqs", endpoint_url=endpoint, region_name=region or session.region_name or DEFAULT_REGION,
                          config=config)
