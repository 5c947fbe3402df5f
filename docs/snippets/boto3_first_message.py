import boto3

sqs = boto3.client(
    "sqs",
    endpoint_url="http://127.0.0.1:9324",
    region_name="us-east-1",
    aws_access_key_id="any",      # any key is accepted until the server is given --credentials
    aws_secret_access_key="any",
)
url = sqs.create_queue(QueueName="jobs", Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
sqs.send_message(QueueUrl=url, MessageBody="hello")
for message in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20).get("Messages", []):
    print(message["Body"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
