"""The optional extra: queueserver.spark imports without PySpark and says what to install when it is needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_without_pyspark(code: str) -> subprocess.CompletedProcess[str]:
    prelude = "import sys; sys.modules['pyspark'] = None\n"  # any import of pyspark now fails
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=REPO_ROOT, check=False, capture_output=True, text=True,
                          timeout=60)


def test_the_package_imports_without_pyspark_and_each_entry_point_names_the_extra() -> None:
    result = run_without_pyspark(
        "import queueserver.spark as qs\n"
        "for attempt in (lambda: qs.register(None), lambda: qs.QueueDataSource,\n"
        "                lambda: qs.run_workers(None, None, 'q', print), lambda: qs.consume):\n"
        "    try:\n"
        "        attempt()\n"
        "    except qs.PySparkMissing as exc:\n"
        "        print(exc)\n")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 4
    assert all("pip install -e '.[spark]' in a clone, pip install 'WHEEL[spark]' for a wheel" in line
               for line in lines)


def test_pyspark_is_installed_where_the_spark_tests_run() -> None:
    from queueserver.spark.compat import MINIMUM, _version_tuple, require_pyspark

    assert _version_tuple(require_pyspark().__version__) >= MINIMUM
