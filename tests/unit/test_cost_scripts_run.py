"""The benchmark tool's in-process subcommands call the engine and the storage functions directly, so a
changed signature there (the engine's keyword-only arguments, say) breaks them without any server test
noticing. Each runs here at its smallest size, as a user would run it; and the tool lists them all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"


@pytest.mark.parametrize("subcommand, args, expected", [
    ("fanout", ["--messages", "160", "--reps", "1", "--body-size", "10", "--scale", "0,2", "--batches", "10",
                        "--receivers", "2"], "4 subscriptions: min"),
    ("send-index", ["--messages", "200", "--reps", "1"], "with messages_by_queue:"),
])
def test_a_cost_subcommand_runs_to_its_figures_at_its_smallest_size(subcommand: str, args: list[str],
                                                                     expected: str) -> None:
    done = subprocess.run([sys.executable, str(BENCH), subcommand, *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout


def test_every_subcommand_answers_its_help() -> None:
    """Each subcommand imports (its moved modules find each other) and documents its options."""
    listing = subprocess.run([sys.executable, str(BENCH), "--help"], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    subcommands = [line.split()[0] for line in listing.stdout.split("subcommands:\n", 1)[1].splitlines() if line]
    assert {"load", "compare", "report", "cost", "cpu", "fanout", "send-index"} <= set(subcommands)
    for subcommand in subcommands:
        done = subprocess.run([sys.executable, str(BENCH), subcommand, "--help"], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and "usage" in done.stdout.lower(), f"{subcommand}: {done.stdout}{done.stderr}"
