"""The one place that checks PySpark is there and new enough, with an error that says what to install.

queueserver.spark is an optional extra: `import queueserver.spark` must work without
PySpark (so that the rest of queueserver, its tests and tools never need it), and the
first thing that does need it must fail with an instruction, not a bare
ModuleNotFoundError from deep inside a pickled reader.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from queueserver.errors import ClientError

MINIMUM = (4, 2)  # latestOffset(start, limit), ReadMaxRows and Trigger.AvailableNow for Python sources
# queueserver is not on PyPI: the extra is installed from where queueserver came from.
INSTALL_HINT = "install the spark extra: pip install -e '.[spark]' in a clone, pip install 'WHEEL[spark]' for a wheel"


class PySparkMissing(ClientError, ImportError):
    """PySpark is not installed, or too old for queueserver.spark."""


def require_pyspark() -> ModuleType:
    """Import pyspark, or raise PySparkMissing saying what to install."""
    try:
        pyspark = importlib.import_module("pyspark")
    except ImportError as exc:
        raise PySparkMissing(f"queueserver.spark needs PySpark {MINIMUM[0]}.{MINIMUM[1]} or newer, which is not "
                             f"installed: {INSTALL_HINT}") from exc
    version = _version_tuple(getattr(pyspark, "__version__", "0"))
    if version < MINIMUM:
        raise PySparkMissing(f"queueserver.spark needs PySpark {MINIMUM[0]}.{MINIMUM[1]} or newer "
                             f"(found {pyspark.__version__}): {INSTALL_HINT}")
    return pyspark


def _version_tuple(version: str) -> tuple[int, int]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 2:
        parts.append(0)
    return parts[0], parts[1]
