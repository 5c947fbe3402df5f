"""A real older boto3 (botocore 1.31.80, which speaks Query to SQS) against the server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "old_client_check.py"


@pytest.mark.oldclient
def test_an_older_boto3_that_speaks_query_runs_a_full_round_trip(server):
    # The old boto3 is prepared beforehand (.ci/run: `python scripts/old_client_check.py --prepare`);
    # the test never downloads, and fails saying so if it is missing.
    result = subprocess.run([sys.executable, str(SCRIPT), "--no-install", "--endpoint", server.endpoint],
                            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    assert "old client round trip OK" in result.stdout and "protocol query" in result.stdout, result.stdout
