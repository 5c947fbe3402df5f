"""Topics with credentials on: the SNS door fails closed. Topic policies and the queue Policy that lets a
topic send are not evaluated yet, so every SNS request is refused with SNS's AuthorizationError (403),
whoever signs it; SQS requests are judged as before."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from support.auth import secret_of


@pytest.mark.parametrize("key_id", ["AKIDALICE", "AKIDNOBODY"])
def test_every_sns_action_is_refused_with_authorization_error(auth_server: Any, alice: Any, key_id: str) -> None:
    sns = boto3.client("sns", endpoint_url=auth_server.endpoint, region_name="us-east-1", aws_access_key_id=key_id,
                       aws_secret_access_key=secret_of("AKIDALICE") if key_id == "AKIDALICE" else "x")
    for call, kwargs in ((sns.create_topic, {"Name": "refused"}), (sns.list_topics, {}),
                         (sns.publish, {"TopicArn": "arn:aws:sns:us-east-1:111111111111:refused", "Message": "m"})):
        with pytest.raises(ClientError) as caught:
            call(**kwargs)
        error = caught.value.response
        assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("AuthorizationError", 403)
    assert alice.list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200  # SQS: judged as before
