import dramatiq
from dramatiq_sqs import SQSBroker

broker = SQSBroker(endpoint_url="http://127.0.0.1:9324", region_name="us-east-1",
                   aws_access_key_id="any", aws_secret_access_key="any")
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name="dramatiq-jobs")
def greet(name):
    print(f"hello, {name}", flush=True)


if __name__ == "__main__":
    greet.send("Dramatiq")  # a worker (dramatiq dramatiq_tasks) prints: hello, Dramatiq
