"""Queues of one name in two regions: different URLs, and a URL alone names its queue whatever
region the request is signed for (AWS: the region is in the URL's host; here, in its path)."""

from __future__ import annotations

from support.sqs import receive


def test_queues_of_one_name_in_two_regions_have_different_urls(server, make_client, queue_name):
    home = make_client(server.endpoint, region="us-east-1")
    away = make_client(server.endpoint, region="eu-west-1")
    home_url = home.create_queue(QueueName=queue_name)["QueueUrl"]
    away_url = away.create_queue(QueueName=queue_name)["QueueUrl"]
    assert home_url == f"{server.endpoint}/000000000000/{queue_name}"
    assert away_url == f"{server.endpoint}/queue/eu-west-1/000000000000/{queue_name}"
    assert away.get_queue_url(QueueName=queue_name)["QueueUrl"] == away_url
    assert away.list_queues(QueueNamePrefix=queue_name)["QueueUrls"] == [away_url]


def test_a_queue_url_names_its_queue_whatever_region_signs_the_request(server, make_client, queue_name):
    home = make_client(server.endpoint, region="us-east-1")
    away = make_client(server.endpoint, region="eu-west-1")
    home_url = home.create_queue(QueueName=queue_name)["QueueUrl"]
    away_url = away.create_queue(QueueName=queue_name)["QueueUrl"]
    home.send_message(QueueUrl=away_url, MessageBody="for eu-west-1")  # signed for us-east-1
    away.send_message(QueueUrl=home_url, MessageBody="for us-east-1")  # signed for eu-west-1
    assert [m["Body"] for m in receive(away, away_url)] == ["for eu-west-1"]
    assert [m["Body"] for m in receive(home, home_url)] == ["for us-east-1"]
    arn = home.get_queue_attributes(QueueUrl=away_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn == f"arn:aws:sqs:eu-west-1:000000000000:{queue_name}"
    # the long form names a queue of the home region too
    long_home_url = f"{server.endpoint}/queue/us-east-1/000000000000/{queue_name}"
    away.send_message(QueueUrl=long_home_url, MessageBody="long form")
    assert [m["Body"] for m in receive(home, home_url)] == ["long form"]


def test_deleting_through_one_region_url_leaves_the_other_region_queue(server, make_client, queue_name):
    home = make_client(server.endpoint, region="us-east-1")
    away = make_client(server.endpoint, region="eu-west-1")
    home_url = home.create_queue(QueueName=queue_name)["QueueUrl"]
    away_url = away.create_queue(QueueName=queue_name)["QueueUrl"]
    home.delete_queue(QueueUrl=away_url)
    assert not away.list_queues(QueueNamePrefix=queue_name).get("QueueUrls")
    assert home.list_queues(QueueNamePrefix=queue_name)["QueueUrls"] == [home_url]


def test_the_home_region_is_the_servers_region_flag(server_factory, make_client, tmp_path, queue_name):
    other = server_factory(tmp_path / "regions.db", "--region", "eu-central-1")
    home = make_client(other.endpoint, region="eu-central-1")
    away = make_client(other.endpoint, region="us-east-1")
    assert home.create_queue(QueueName=queue_name)["QueueUrl"] == f"{other.endpoint}/000000000000/{queue_name}"
    assert away.create_queue(QueueName=queue_name)["QueueUrl"] == (
        f"{other.endpoint}/queue/us-east-1/000000000000/{queue_name}")
    other.stop()
