"""The Litestream supervisor against a stand-in program that says what the real one would not: a line of
any length, then a record; a supervisor that fails is started again and says so; the folder a killed
server left behind is removed at the next start. The child is a real process; the supervisor runs here."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from queueserver.replication import replica
from queueserver.replication.supervisor import FOLDER_PREFIX, OWNER_FILE, Replicator
from support.server import wait_for

# Each run: a line of 1 MiB with no record in it, a 200 KiB line cut by a newline, then an error record;
# then it stays (like Litestream) until it is stopped, writing a debug record a second.
STAND_IN = f"""#!{sys.executable}
import sys, time, json
if sys.argv[1] != "replicate":  # `sync -wait` at the stop: nothing to upload
    sys.exit(0)
out = sys.stdout
out.write("x" * (1 << 20) + "\\n")
out.write(json.dumps({{"level": "INFO", "msg": "y" * 200_000}}) + "\\n")
out.write(json.dumps({{"level": "ERROR", "msg": "after the long lines"}}) + "\\n")
out.flush()
while True:
    time.sleep(0.2)
    out.write(json.dumps({{"level": "DEBUG", "msg": "tick"}}) + "\\n")
    out.flush()
"""


def _stand_in(tmp_path: Path) -> str:
    program = tmp_path / "litestream"
    program.write_text(STAND_IN)
    program.chmod(0o755)
    return str(program)


async def _until(predicate, what: str) -> None:
    """support.server.wait_for on a thread: the event loop runs the supervisor meanwhile."""
    await asyncio.to_thread(wait_for, predicate, what)


def test_a_line_of_any_length_is_read_in_bounded_chunks_and_the_records_after_it_are_heard(tmp_path):
    async def scenario() -> None:
        replicator = Replicator(str(tmp_path / "q.db"), replica(str(tmp_path / "replica")), _stand_in(tmp_path))
        task = await replicator.start()
        await _until(lambda: replicator.status.last_error is not None, "the record after the long lines")
        assert replicator.status.last_error[1] == "after the long lines"
        assert replicator.status.running and not task.done()
        await replicator.stop()
        assert replicator.report().restarts == 0

    asyncio.run(scenario())


def test_a_supervisor_that_fails_is_started_again_and_the_report_says_so(tmp_path):
    async def scenario() -> None:
        replicator = Replicator(str(tmp_path / "q.db"), replica(str(tmp_path / "replica")), _stand_in(tmp_path))
        calls: list[bool] = []

        def on_running(running: bool) -> None:  # the server's callback, failing once
            calls.append(running)
            if len(calls) == 1:
                raise RuntimeError("the callback failed")

        replicator.on_running = on_running
        task = await replicator.start()
        await _until(lambda: replicator.report().supervisor_failures == 1 and replicator.status.running,
                     "the supervisor to be started again")
        shown = replicator.report().as_dict()
        assert shown["supervisor_failures"] == 1 and "the callback failed" in str(replicator.status.last_error)
        assert not task.done()  # the server's health watch sees a supervisor that goes on
        await replicator.stop()
        assert calls[:2] == [True, False]  # the first child was ended with the failed supervision

    asyncio.run(scenario())


def test_the_folder_a_killed_server_left_behind_is_removed_at_the_next_start(tmp_path):
    temp = Path(tempfile.gettempdir())
    dead = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # a process id that no longer runs
    (dead / OWNER_FILE).write_text(str(pid))
    alive = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
    (alive / OWNER_FILE).write_text(str(os.getppid()))  # a live process's: another server's, kept

    async def scenario() -> None:
        replicator = Replicator(str(tmp_path / "q.db"), replica(str(tmp_path / "replica")), _stand_in(tmp_path))
        await replicator.start()
        await replicator.stop()

    try:
        asyncio.run(scenario())
        assert not dead.exists() and alive.exists() and temp.exists()
    finally:
        (alive / OWNER_FILE).unlink()
        alive.rmdir()
