"""The docs' pytest-plugin example (docs/testing.md includes docs/snippets/pytest_plugin_example.py), run as printed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLE = DOCS / "snippets" / "pytest_plugin_example.py"


def test_the_docs_example_of_a_crash_in_the_middle_of_the_work_passes(pytester: pytest.Pytester) -> None:
    source = EXAMPLE.read_text()
    assert '--8<-- "pytest_plugin_example.py"' in (DOCS / "testing.md").read_text()
    assert "queueserver.crash()" in source and "queueserver.advance(" in source
    pytester.makepyfile(test_docs_example=source)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error", timeout=180)
    result.assert_outcomes(passed=1)
