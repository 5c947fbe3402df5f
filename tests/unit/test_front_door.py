"""The README keeps its promises: short, opening with the two commands that work on a fresh machine, the test
command the one CI runs, and first messages that are the docs' recipes (which tests/clients runs)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
MOST_LINES = 200


def _opening_commands() -> list[str]:
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block, "the README opens with no sh block"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def _steps(command: str) -> list[str]:
    return [step.strip().replace("--quiet ", "") for step in command.split("&&")]


def test_the_readme_is_a_front_door_of_at_most_200_lines() -> None:
    assert len(README.splitlines()) <= MOST_LINES


def test_the_readme_opens_with_a_command_that_serves_and_one_that_tests() -> None:
    serve, test = _opening_commands()
    assert _steps(serve)[-1] == ".venv/bin/queueserver serve"
    assert _steps(test)[-1] == ".venv/bin/python -m pytest"


def test_ci_runs_the_readmes_test_command() -> None:
    ci = [line.strip().replace("--quiet ", "") for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    _, test = _opening_commands()
    python_steps = [step for step in _steps(test) if not step.startswith("apt-get ")]
    assert [step for step in python_steps if step not in ci] == []
    assert ci.index(python_steps[-1]) > ci.index(python_steps[-2])  # the tests run once everything is prepared


def test_the_readmes_first_messages_are_the_recipes_the_client_tests_run() -> None:
    shown = dict(re.findall(r"<!-- readme-example: (\S+) -->\n```\w+\n(.*?)```", README, re.S))
    assert sorted(shown) == ["aws_cli.sh", "boto3_first_message.py"]
    for name, text in shown.items():
        assert text == (ROOT / "docs" / "snippets" / name).read_text(), f"the README's {name} differs from the docs'"
