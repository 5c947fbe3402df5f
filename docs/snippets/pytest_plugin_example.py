import time

from queueserver.consumer import Worker


def test_no_job_is_lost_when_the_queue_crashes(queueserver):
    url = queueserver.create_queue("jobs", VisibilityTimeout=60)
    sqs = queueserver.client()
    jobs = {f"job-{n}" for n in range(40)}
    for job in sorted(jobs):
        sqs.send_message(QueueUrl=url, MessageBody=job)

    done = []

    def handle(message):
        time.sleep(0.02)                      # the work
        done.append(message["Body"])

    worker = Worker(queueserver.client(), url, handle, max_concurrency=4, wait_time_seconds=1)
    worker.start()
    queueserver.wait_for(lambda: len(done) >= 10)
    queueserver.crash()       # SIGKILL in the middle of the work, then a start on the same file
    assert len(done) < len(jobs)
    queueserver.advance(61)   # past the visibility timeout: what was received but not deleted comes back
    queueserver.wait_for(lambda: queueserver.counts(url) == {"visible": 0, "in_flight": 0, "delayed": 0},
                         timeout=30)
    worker.stop()
    worker.join()

    assert set(done) == jobs   # every job done at least once, none left in the queue
