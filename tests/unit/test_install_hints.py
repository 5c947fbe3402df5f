"""What the server says to install when an extra is missing is what installs it: queueserver is not on PyPI, so
a hint names the clone's and the wheel's forms, and the replicate extra's one package exactly as pyproject declares
it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from queueserver.replication import litestream
from queueserver.spark import compat

ROOT = Path(__file__).resolve().parents[2]


def test_the_replicate_hint_names_the_extras_one_package_as_pyproject_declares_it() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["replicate"] == [litestream.EXTRA_REQUIREMENT]
    assert f"pip install '{litestream.EXTRA_REQUIREMENT}'" in litestream.EXTRA_HINT


def test_the_spark_hint_names_the_clones_and_the_wheels_forms() -> None:
    assert "pip install -e '.[spark]'" in compat.INSTALL_HINT and "'WHEEL[spark]'" in compat.INSTALL_HINT
