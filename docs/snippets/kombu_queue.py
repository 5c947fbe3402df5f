from kombu import Connection

# kombu's SQS transport takes the endpoint from the URL's host and port; is_secure=False makes it plain HTTP.
with Connection("sqs://any:any@127.0.0.1:9324",
                transport_options={"region": "us-east-1", "is_secure": False}) as connection:
    queue = connection.SimpleQueue("kombu-jobs")
    queue.put({"order": 42})
    message = queue.get(block=True, timeout=20)
    print(message.payload)
    message.ack()
    queue.close()
