"""``verl-ext schedule`` and the update lag with extreme counts (issue 41): huge ``--mini-batches``/``--epochs`` ran out
of memory (a list of one item per update) or overflowed a float. The counts are bounded with a clear error (exit 2,
naming the option and the range), and the preview is computed in closed form: the largest allowed counts cost what the
smallest do. Each command runs in a child process with a memory limit, so that a regression fails instead of exhausting
the suite."""

import json
import os
import subprocess
import sys

import pytest

from tests.run_scripts.scripts import REPO
from verl_ext.staleness.update_lag import MAX_COUNT, UpdateLag, scheduled_update_lag, update_lag, updates_per_step

LIMITED = ("import resource, sys\n"
           "resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))\n"
           "from verl_ext.staleness.cli import schedule_main\n"
           "sys.exit(schedule_main(sys.argv[1:]))\n")


def schedule(*argv):
    return subprocess.run([sys.executable, "-c", LIMITED, *argv], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"})


@pytest.mark.parametrize("option", ["--mini-batches", "--epochs"])
@pytest.mark.parametrize("value", [str(MAX_COUNT + 1), str(10**400), "0"])
def test_a_count_out_of_range_is_refused_naming_the_option(option, value):
    child = schedule("--steps", "10", option, value)
    assert child.returncode == 2 and "Traceback" not in child.stderr, child.stderr
    assert f"argument {option}: expected an integer in 1..{MAX_COUNT}" in child.stderr, child.stderr


def test_the_largest_counts_preview_in_closed_form_within_memory():
    updates = MAX_COUNT * MAX_COUNT
    child = schedule("--steps", "100", "--sync-interval", "3", "--sync-offset", "1", "--mini-batches", str(MAX_COUNT),
                     "--epochs", str(MAX_COUNT))
    assert child.returncode == 0, child.stderr[-3000:]
    assert f"{updates} optimizer update(s) per step" in child.stdout, child.stdout[-2000:]
    child = schedule("--steps", str(10**100), "--offline", "--mini-batches", str(MAX_COUNT), "--epochs", str(MAX_COUNT))
    assert child.returncode == 0, child.stderr[-3000:]
    assert f"here 0..{updates * (10**100 - 1) + updates - 1}" in child.stdout.replace("\n", " "), child.stdout[-2000:]
    child = schedule("--steps", "4", "--format", "json", "--mini-batches", str(MAX_COUNT), "--epochs", str(MAX_COUNT))
    assert child.returncode == 0, child.stderr[-3000:]
    assert json.loads(child.stdout)[0]["update_lag_last"] == updates - 1


def test_steps_beyond_the_bound_are_refused():
    child = schedule("--steps", str(10**400))
    assert child.returncode == 2 and "argument --steps: expected an integer in 0..10**100, got one of 401 digits" \
        in child.stderr, child.stderr


def test_the_update_lag_functions_bound_their_counts_and_never_overflow():
    assert scheduled_update_lag(7, MAX_COUNT, MAX_COUNT) == UpdateLag(
        first=7 * MAX_COUNT**2, last=8 * MAX_COUNT**2 - 1, token_mean=(15 * MAX_COUNT**2 - 1) / 2, updates=MAX_COUNT**2)
    for bad in (MAX_COUNT + 1, 10**400, 0, True):
        with pytest.raises(ValueError, match="mini_batches must be an integer in 1..1000000"):
            updates_per_step(bad, 1)
    with pytest.raises(ValueError, match="beyond a float's range"):  # not an OverflowError traceback
        update_lag(10**400, [1, 2])
    assert update_lag(10**20, [1, 1]).token_mean == float(10**20)
