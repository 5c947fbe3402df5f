"""The figures of docs/benchmarks.md, as markdown, from the raw results of `python scripts/bench load`.

`load` writes every run's raw results (every repetition, the machine, the server's source) to a JSON
file; this prints that run's table again, to paste into the report's current figures:

    python scripts/bench load --rev HEAD --json run.json    # on a quiet machine: ~15-20 min
    python scripts/bench report run.json
    python scripts/bench cost                                # the instruction counts, the other table
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.load import report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/bench report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path, help="JSON files written by `python scripts/bench load`")
    args = parser.parse_args(argv)
    for path in args.results:
        results = json.loads(path.read_text())
        print(f"### {path.name}: {results['server_source']}")
        print(f"\nmachine: {results['machine']}")
        print(report(results, args))
    return 0
