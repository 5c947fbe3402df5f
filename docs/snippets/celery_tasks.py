from celery import Celery

app = Celery("celery_tasks", broker="sqs://any:any@127.0.0.1:9324")
app.conf.broker_transport_options = {"region": "us-east-1", "is_secure": False}
app.conf.task_default_queue = "celery-jobs"
app.conf.broker_connection_retry_on_startup = True


@app.task
def add(x, y):
    return x + y


if __name__ == "__main__":
    add.delay(2, 3)  # a worker (celery -A celery_tasks worker) logs: Task celery_tasks.add[…] succeeded …: 5
