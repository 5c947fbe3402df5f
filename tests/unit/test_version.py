"""One version: pyproject.toml's, which the installed distribution carries and `queueserver --version` says."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import queueserver

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_queueserver_version_reports_the_version_pyproject_declares() -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    shown = subprocess.run([sys.executable, "-m", "queueserver", "--version"], capture_output=True, text=True,
                           timeout=60, check=True).stdout
    assert shown == f"queueserver {declared}\n"
    assert queueserver.__version__ == version("queueserver") == declared


def test_the_changelog_has_an_entry_for_the_version() -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    changelog = (PYPROJECT.parent / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog and f"## [{declared}]" in changelog
