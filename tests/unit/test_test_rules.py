"""The suite keeps tests/README.md's promise: time moves through the test clock, tests wait for
events rather than sleeping, and no test asserts how long something took.

An AST walk over every module under tests/ finds two things:

- sleeps: `time.sleep(...)` and `asyncio.sleep(...)` with anything but a literal 0 (which only
  yields to the event loop);
- timing asserts: an `assert` that compares a wall-clock difference: a subtraction with a
  reading of `time.monotonic()`, `time.perf_counter()` or `time.time()` (or a name or attribute
  assigned one) on a side, or a name, attribute or function result assigned from such a
  difference (`elapsed = time.monotonic() - started; assert elapsed < 2`).

Each one left is in ALLOWED, with why it is needed: one reason per occurrence, in file order. A
new one fails the check until it is replaced by a wait for its event (support.server.wait_for, the
clock's timer count, a log line, a counter in /metrics, the server's own state) or listed with its
reason; a listed one that is gone fails it too, so the list stays the truth.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

_POLL = "a bounded poll for a condition (the suite's waits for events)"

ALLOWED: dict[str, tuple[str, ...]] = {
    "support/server.py": (f"wait_for: {_POLL}; every other wait for an event goes through it",),
    "support/powercut.py": ("the power-cut run's last pause under load: a random stretch of real time is "
                            "the workload, as in the crash workload's runs",),
    "support/crash_workload.py": ("a random stretch of real time under load between two kills: the load is real",
                                  "the last stretch under load before the last kill: the load is real"),
    "support/machine_loss.py": ("the stretch of real time under load before the machine is lost: the load is "
                                "real, and the loss window is measured against it",),
    "unit/test_database.py": (f"until: {_POLL} a database thread or its idle tick makes true",),
    "unit/test_engine.py": (f"until: {_POLL} the database thread makes true, such as a poll's pending timer",),
    "unit/test_shared_bodies.py": (f"{_POLL}: a move task runs steps of its own until the queue is refilled",),
    "unit/test_count_cache.py": ("the count cache's max age runs on the event loop's real clock: only real time "
                                 "makes a count older than it",),
    "integration/test_fifo_concurrency.py": (
        "pacing between empty short polls of a real concurrent run (its history is checked, never its timing)",
        "the work between receive and delete, so that concurrent holds overlap in real time",
    ),
    "crash/test_readiness.py": ("a rate's upper bound (at most one probe a second over the seconds the flood took): "
                                "a slower machine only loosens it",),
    "plugin/test_queue_server_handle.py": ("six seconds of real time against a five-second visibility: real time "
                                           "passing without moving the test clock is the point of the test",),
    "spark/test_spark_batch_read.py": ("executors heartbeat on the real clock: a consumer keeps trying to steal "
                                       "for twice the visibility timeout",),
    "spark/test_spark_executor_loss.py": (
        f"{_POLL} on the executors, which have no wait_for: a handler holds its item while the stall file exists",
        "the handler's work, run on the executors in real time",
        f"{_POLL} on the executors: the stream's map holds its row while the stall file exists",
    ),
    "spark/test_spark_stream_read.py": (
        f"{_POLL} in foreachBatch (the driver, or the Connect server's Python): the batch lasts until the test "
        "releases it",
        "executors heartbeat on the real clock: a consumer keeps trying to steal for 2.5 visibility timeouts",
    ),
    "spark/test_spark_workers.py": (
        "the handler's work, run on the executors in real time (the slow item outlasts its visibility)",
        "no event marks a request the killed executors sent last: the pause lets it land before the queue is read",
    ),
}

_CLOCK_READINGS = {"monotonic", "perf_counter", "monotonic_ns", "perf_counter_ns"}  # any module's: time's
_WALL_CLOCK = {"time.time", "time.time_ns"}


@dataclass(frozen=True)
class Finding:
    line: int
    kind: str  # "sleep" or "timing assert"
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.kind}: {self.text}"


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    return ""


def _target_key(node: ast.AST) -> str | None:
    """What an assignment target is known by: a name, or an attribute's last part (`self.started`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Module:
    """Which names hold clock readings and which hold durations, module-wide, by their identifiers."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.from_time = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                          and node.module == "time" for alias in node.names}
        self.readings: set[str] = set()
        self.durations: set[str] = set()
        self.duration_functions: set[str] = set()
        self._learn()

    def is_sleep(self, call: ast.Call) -> bool:
        name = _dotted(call.func)
        if name == "time.sleep" or (name == "sleep" and "sleep" in self.from_time):
            return True
        if name == "asyncio.sleep":
            first = call.args[0] if call.args else None
            return not (isinstance(first, ast.Constant) and first.value == 0)
        return False

    def _is_reading(self, node: ast.AST) -> bool:
        """A clock reading: a call of a clock, or a name or attribute assigned one."""
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            last = name.rpartition(".")[2]
            return name in _WALL_CLOCK or (last in _CLOCK_READINGS and (name.startswith("time.")
                                                                         or last in self.from_time))
        key = _target_key(node)
        return key is not None and key in self.readings

    def _holds_reading(self, node: ast.AST) -> bool:
        """An expression whose value is an instant: a reading, or a reading plus or minus an amount."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            return self._holds_reading(node.left) or (isinstance(node.op, ast.Add)
                                                      and self._holds_reading(node.right))
        return self._is_reading(node)

    def is_duration(self, node: ast.AST) -> bool:
        """Does the expression contain a wall-clock difference (or a name or call known to hold one)?"""
        for inner in ast.walk(node):
            if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub) and (
                    self._holds_reading(inner.left) or self._holds_reading(inner.right)):
                return True
            key = _target_key(inner)
            if key is not None and key in self.durations and isinstance(inner, (ast.Name, ast.Attribute)):
                return True
            if isinstance(inner, ast.Call) and _dotted(inner.func).rpartition(".")[2] in self.duration_functions:
                return True
        return False

    def _learn(self) -> None:
        for _ in range(4):  # names learnt in one pass may make others known in the next
            before = (len(self.readings), len(self.durations), len(self.duration_functions))
            for node in ast.walk(self.tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    keys = [key for target in targets for element in ast.walk(target)
                            if (key := _target_key(element)) is not None]
                    if self.is_duration(node.value):
                        self.durations.update(keys)
                    elif self._holds_reading(node.value):
                        self.readings.update(keys)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if any(isinstance(inner, ast.Return) and inner.value is not None and self.is_duration(inner.value)
                           for inner in ast.walk(node)):
                        self.duration_functions.add(node.name)
            if before == (len(self.readings), len(self.durations), len(self.duration_functions)):
                return


def timing_findings(source: str) -> list[Finding]:
    """The sleeps and the timing asserts in one module's source, in line order."""
    tree = ast.parse(source)
    module = _Module(tree)
    lines = source.splitlines()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and module.is_sleep(node):
            found.append(Finding(node.lineno, "sleep", lines[node.lineno - 1].strip()))
        elif isinstance(node, ast.Assert) and any(
                module.is_duration(operand) for compare in ast.walk(node.test) if isinstance(compare, ast.Compare)
                for operand in [compare.left, *compare.comparators]):
            found.append(Finding(node.lineno, "timing assert", lines[node.lineno - 1].strip()))
    return sorted(found, key=lambda finding: finding.line)


def violations(sources: dict[str, str], allowed: dict[str, tuple[str, ...]]) -> list[str]:
    """What breaks the rule: per file, more findings than reasons (new ones) or fewer (stale reasons)."""
    problems = []
    for path in sorted(set(sources) | set(allowed)):
        found = timing_findings(sources[path]) if path in sources else []
        reasons = allowed.get(path, ())
        if len(found) > len(reasons):
            listed = "\n    ".join(str(finding) for finding in found)
            problems.append(f"{path}: {len(found)} sleeps or timing asserts, {len(reasons)} allowed. Wait for the "
                            f"event instead (support.server.wait_for, the clock's timers, a log line, /metrics), "
                            f"or add the reason it is needed to ALLOWED:\n    {listed}")
        elif len(found) < len(reasons):
            problems.append(f"{path}: {len(reasons)} reasons in ALLOWED but {len(found)} sleeps or timing asserts "
                            f"left: remove the reasons of those that are gone")
    return problems


def suite_sources() -> dict[str, str]:
    return {path.relative_to(TESTS).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(TESTS.rglob("*.py"))}


def test_every_sleep_and_timing_assert_left_in_the_suite_is_allowed_with_its_reason() -> None:
    problems = violations(suite_sources(), ALLOWED)
    assert not problems, "\n\n".join(problems)


PLANTED = '''
import asyncio
import time


def test_planted(clock, poller):
    started = time.monotonic()
    time.sleep(0.5)                                  # a sleep standing in for an event
    assert time.monotonic() - started < 2            # a difference compared in an assert
    elapsed = time.perf_counter() - started
    assert 0.8 <= elapsed                            # a name holding a difference
    assert poller.latency_since(started) < 0.5       # a function returning one


class Poller:
    def __init__(self):
        self.returned_at = time.monotonic()

    def latency_since(self, t):
        return self.returned_at - t


async def test_planted_async():
    await asyncio.sleep(0.05)                        # an asyncio sleep of more than nothing
'''

NOT_TIMING = '''
import asyncio
import time


async def test_waits_that_are_not_timing(server):
    await asyncio.sleep(0)                           # a yield to the event loop
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:               # a bounded wait, asserting nothing about time
        assert server.alive, "the server died"
    assert server.clock_ms - 5 == server.started_ms  # test-clock arithmetic
'''


def test_a_planted_sleep_and_planted_timing_asserts_fail_the_check() -> None:
    found = timing_findings(PLANTED)
    assert [(finding.line, finding.kind) for finding in found] == [
        (8, "sleep"), (9, "timing assert"), (11, "timing assert"), (12, "timing assert"), (24, "sleep")]
    problems = violations({"integration/test_planted.py": PLANTED}, {})
    assert len(problems) == 1 and problems[0].startswith("integration/test_planted.py: 5 sleeps or timing asserts")
    assert "time.sleep(0.5)" in problems[0] and "elapsed" in problems[0]
    assert violations({"integration/test_planted.py": PLANTED}, {"integration/test_planted.py": ("why",) * 5}) == []


def test_a_reason_whose_sleep_is_gone_fails_the_check_too() -> None:
    problems = violations({"integration/test_planted.py": PLANTED}, {"integration/test_planted.py": ("why",) * 6})
    assert len(problems) == 1 and "remove the reasons" in problems[0]
    assert violations({}, {"integration/test_gone.py": ("why",)}) != []


def test_a_yield_a_bounded_wait_and_test_clock_arithmetic_are_not_findings() -> None:
    assert timing_findings(NOT_TIMING) == []
