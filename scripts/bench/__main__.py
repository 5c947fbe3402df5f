"""The benchmark tool: `python scripts/bench SUBCOMMAND ...` (`python scripts/bench -h` lists them).

Every subcommand starts its servers through queueserver.testing, the harness users get.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as `python scripts/bench`: import the package from scripts/
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from bench.cli import main  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    sys.exit(main())
