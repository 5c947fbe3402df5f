"""The in-process cost scripts call the engine and the storage functions directly, so a changed
signature there (the engine's keyword-only arguments, say) breaks them without any server test
noticing. Each runs here at its smallest size, as a user would run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.mark.parametrize("script, args, expected", [
    ("fanout_cost.py", ["--messages", "160", "--reps", "1", "--body-size", "10", "--scale", "0,2", "--batches", "10",
                        "--receivers", "2"], "4 subscriptions: min"),
    ("send_index_cost.py", ["--messages", "200", "--reps", "1"], "with messages_by_queue:"),
])
def test_a_cost_script_runs_to_its_figures_at_its_smallest_size(script: str, args: list[str], expected: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPTS / script), *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout
