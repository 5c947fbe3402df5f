"""Soak test: the crash test of tests/crash with hundreds of SIGKILLs.

Concurrent clients send (single and batch), receive, delete and change visibility
while the server is SIGKILLed and restarted on the same file, --kills times, at
random moments --seconds-between apart on average. At the end a --test-clock server
drains the queue and the records are checked. It prints the figures and exits 0 when
nothing acknowledged was lost, nothing deleted came back, no receive count went down
and the file's integrity check is ok; 1 otherwise.

    .venv/bin/python scripts/soak.py --kills 200 --seconds-between 1.5
"""

from __future__ import annotations

import argparse
import sys
import shutil
import tempfile
import time
from pathlib import Path

import benchkit
import crashkit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="how many times to SIGKILL the server (default 200)")
    parser.add_argument("--seconds-between", type=float, default=1.5,
                        help="mean seconds of load between kills; each gap is uniform in [0.5x, 1.5x] (default 1.5)")
    parser.add_argument("--producers", type=int, default=2, help="sending threads (default 2)")
    parser.add_argument("--consumers", type=int, default=3, help="receiving threads (default 3)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--workdir", default=None, help="where the database goes (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder afterwards")
    args = parser.parse_args(argv)
    if args.kills < 1 or args.seconds_between <= 0:
        parser.error("--kills must be >= 1 and --seconds-between > 0")

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="queueserver-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    seed = args.seed if args.seed is not None else int(time.time())
    print(f"soak: {args.kills} kills, ~{args.seconds_between}s apart, seed {seed}, in {workdir}", flush=True)
    started = time.monotonic()
    try:
        figures = crashkit.crash_run(
            workdir, kills=args.kills,
            seconds_between=(0.5 * args.seconds_between, 1.5 * args.seconds_between),
            log=lambda line: print(line, flush=True), producers=args.producers, consumers=args.consumers,
            seed=seed)
        check = benchkit.run_queueserver("check", "--db", str(workdir / "crash.db"))
    finally:
        if not args.workdir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"--- after {time.monotonic() - started:.0f}s ---")
    print(figures.report())
    print(f"queueserver check (exit {check.returncode}): {' | '.join(check.stdout.splitlines())}{check.stderr.strip()}")
    ok = figures.ok and check.returncode == 0
    print("RESULT:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
