"""bench/load.py, run briefly: under overload the server answers 2xx, 3xx, or 503 or 429 with Retry-After, and nothing
else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LOAD = Path(__file__).resolve().parent.parent / "bench" / "load.py"


@pytest.mark.slow
def test_a_short_overload_gets_only_pages_redirects_and_busy_answers() -> None:
    # A queue of 2 and batches of 1 are overloaded by a handful of clients asking for new pages at once.
    command = [sys.executable, str(LOAD), "--clients", "10", "--seconds", "4", "--warm", "2", "--json"]
    command += ["--max-queue", "2", "--max-batch", "1", "--mix", "cached=30,new=40,regenerate=10,post=20"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    finished = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, check=False)
    assert finished.stdout, finished.stderr
    result = json.loads(finished.stdout)
    statuses = result["total"]["statuses"]
    assert set(statuses) <= {"2xx", "3xx", "503+retry-after"}, statuses
    assert statuses.get("503+retry-after", 0) > 0  # the overload really happened
    assert result["kinds"]["cached"]["ok"] > 0 and result["kinds"]["post"]["ok"] > 0
    assert result["probes"] > 0 and result["failed_probes"] == 0 and result["server_answering_at_end"]
    assert result["posts_lost"] == 0 and result["error_log"] == []
    assert finished.returncode == 0


@pytest.mark.slow
def test_a_greedy_address_is_held_to_its_runs_and_the_other_clients_are_not() -> None:
    # Six connections from one address ask for new pages only; each ordinary client has an address of its own.
    command = [sys.executable, str(LOAD), "--clients", "4", "--greedy", "6", "--runs-per-client", "2"]
    command += ["--seconds", "4", "--warm", "2", "--json", "--mix", "cached=40,new=40,post=20"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    finished = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, check=False)
    assert finished.stdout, finished.stderr
    result = json.loads(finished.stdout)
    greedy, others = result["kinds"]["greedy"], result["total"]
    assert greedy["busy_429"] > 0 and greedy["ok"] > 0 and greedy["errors"] == 0  # held back, not shut out
    assert set(greedy["statuses"]) <= {"2xx", "3xx", "429+retry-after", "503+retry-after"}, greedy["statuses"]
    assert others["busy_429"] == 0 and others["errors"] == 0 and result["kinds"]["new"]["ok"] > 0
    assert result["posts_lost"] == 0 and result["error_log"] == [] and finished.returncode == 0
