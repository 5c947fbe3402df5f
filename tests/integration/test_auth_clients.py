"""queueserver's own clients against a server with credentials on: the Spark source's connection signs
its boto3 calls and its raw browse request; without keys it is refused, as any unsigned caller."""

from __future__ import annotations

import pytest
from support.auth import KEYS, OWNER_ACCOUNT, signed_client, write_credentials
from botocore.exceptions import ClientError
from support.server import start

from queueserver.spark.connection import Connection, browse_page


def test_the_spark_connection_signs_receives_and_browses_with_its_keys(tmp_path):
    server = start(tmp_path / "spark.db", "--credentials", str(write_credentials(tmp_path / "keys.toml")))
    try:
        alice = signed_client("json", server.endpoint, "AKIDALICE")
        url = alice.create_queue(QueueName="spark-source")["QueueUrl"]
        alice.send_message(QueueUrl=url, MessageBody="for spark")
        connection = Connection(queue="spark-source", endpoint=server.endpoint, region="us-east-1",
                                access_key_id="AKIDALICE",
                                secret_access_key=KEYS["AKIDALICE"]["secret_access_key"])
        assert connection.queue_url() == url and f"/{OWNER_ACCOUNT}/" in url
        messages, token = browse_page(connection.client(), url)
        assert [m["Body"] for m in messages] == ["for spark"] and token is None
        wrong = Connection(queue="spark-source", endpoint=server.endpoint, region="us-east-1",
                           access_key_id="AKIDALICE", secret_access_key="not-the-secret")
        with pytest.raises(ClientError) as caught:
            wrong.client().receive_message(QueueUrl=url)
        assert caught.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
        with pytest.raises(RuntimeError, match="HTTP 403"):
            browse_page(wrong.client(), url)
    finally:
        assert server.stop() == 0
