"""The README's pytest-plugin example, run exactly as it is printed there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example(name: str) -> str:
    text = README.read_text()
    match = re.search(rf"<!-- readme-example: {name} -->\n```python\n(.*?)```", text, re.S)
    assert match, f"the README has no example marked {name}"
    return match.group(1)


def test_the_readme_example_of_a_crash_in_the_middle_of_the_work_passes(pytester: pytest.Pytester) -> None:
    source = readme_example("pytest-plugin")
    assert "queueserver.crash()" in source and "queueserver.advance(" in source
    pytester.makepyfile(test_readme=source)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error", timeout=180)
    result.assert_outcomes(passed=1)
