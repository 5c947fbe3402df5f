"""The pytest plugin, run the way a user runs it: pytest in a subprocess with only the entry point.

Each test writes a small test file into a fresh folder (pytester) and runs pytest on it in a
child process, where the plugin is loaded from the installed `pytest11` entry point, not from
this suite.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=180)


def test_the_queueserver_fixture_gives_each_test_its_own_server_and_database(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        seen = []

        def test_one(queueserver):
            queueserver.create_queue("only-mine")
            seen.append((queueserver.endpoint, queueserver.db_path))
            assert len(queueserver.client().list_queues()["QueueUrls"]) == 1

        def test_two(queueserver):
            queueserver.create_queue("only-mine")
            assert len(queueserver.client().list_queues()["QueueUrls"]) == 1
            assert queueserver.db_path != seen[0][1]
            assert not seen[0][1].exists()   # the first test's database went with its server
    """)
    run(pytester).assert_outcomes(passed=2)


def test_the_sqs_fixture_is_a_boto3_client_on_the_tests_server(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_it(queueserver, sqs):
            url = sqs.create_queue(QueueName="via-sqs")["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody="hi")
            assert sqs.meta.endpoint_url == queueserver.endpoint
            assert [m["Body"] for m in queueserver.messages(url)] == ["hi"]
    """)
    run(pytester).assert_outcomes(passed=1)


def test_the_session_server_is_shared_and_emptied_between_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        endpoints = set()

        def test_first(queueserver_session):
            endpoints.add(queueserver_session.endpoint)
            queueserver_session.create_queue("shared")
            queueserver_session.create_queue("elsewhere", region="eu-west-1")

        def test_second_starts_empty(queueserver_session):
            endpoints.add(queueserver_session.endpoint)
            assert queueserver_session.client().list_queues().get("QueueUrls", []) == []
            assert queueserver_session.client("eu-west-1").list_queues().get("QueueUrls", []) == []

        def test_third_may_stop_it_and_the_next_gets_it_back(queueserver_session):
            queueserver_session.kill()

        def test_fourth(queueserver_session):
            endpoints.add(queueserver_session.endpoint)
            assert queueserver_session.client().list_queues().get("QueueUrls", []) == []
            assert len(endpoints) == 1
    """)
    run(pytester).assert_outcomes(passed=4)


def test_a_failed_test_gets_the_servers_log_in_its_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_fails(queueserver):
            queueserver.crash()
            assert False, "on purpose"

        def test_passes(queueserver):
            pass
    """)
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    assert re.search(r"-+ queueserver log \(.*queueserver\.db\) -+", output)
    assert output.count("--- -m queueserver serve") == 2  # the start and the start after the crash
    assert "database at version" in output  # the server's own lines, not only the harness's
    no_log = run(pytester, "--queueserver-no-log")
    assert "queueserver log" not in no_log.stdout.str()


def test_keep_db_keeps_and_names_the_database_of_a_failed_test_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_fails(queueserver):
            queueserver.create_queue("evidence")
            assert False

        def test_passes(queueserver):
            queueserver.create_queue("no-evidence")
    """)
    result = run(pytester, "--queueserver-keep-db")
    result.assert_outcomes(passed=1, failed=1)
    kept = re.findall(r"kept at (\S+queueserver\.db)", result.stdout.str())
    assert len(kept) == 1
    assert Path(kept[0]).exists()
    default = run(pytester)
    assert "kept at" not in default.stdout.str()


def test_the_plugin_can_be_turned_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_it(queueserver):
            pass
    """)
    result = run(pytester, "-p", "no:queueserver")
    result.assert_outcomes(errors=1)
    assert "fixture 'queueserver' not found" in result.stdout.str()


def test_under_xdist_each_worker_runs_its_own_server(pytester: pytest.Pytester) -> None:
    record = pytester.path / "endpoints"
    record.mkdir()
    pytester.makepyfile(f"""
        import os
        from pathlib import Path

        def test_first(queueserver_session):
            queueserver_session.create_queue("same-name")
            worker = os.environ["PYTEST_XDIST_WORKER"]
            (Path({str(record)!r}) / worker).write_text(queueserver_session.endpoint)

        def test_second(queueserver, queueserver_session):
            queueserver.create_queue("same-name")
            assert queueserver.endpoint != queueserver_session.endpoint
    """)
    result = run(pytester, "-p", "xdist", "-n", "2", "--dist", "each")  # every test on both workers
    result.assert_outcomes(passed=4)
    endpoints = {path.name: path.read_text() for path in record.iterdir()}
    assert sorted(endpoints) == ["gw0", "gw1"]
    assert len(set(endpoints.values())) == 2
