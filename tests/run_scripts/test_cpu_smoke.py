"""A run script for real on the CPU backend (VERL_EXT_CPU_SMOKE=1): verl's main_ppo with the tiny model and
synthetic data substituted and every other override of the script kept, for 2 steps; checked from verl's
logged metrics, then plotted. Chosen for the most distinct override set: off-policy GRPO (pi_k recomputed,
behaviour log-probs as IS weights, zero-variance masking, GSM8k's evaluation, a figure script's grid).
(Every other script's composed configuration, the 30B profile's offloading included, passes the dry run:
tests/run_scripts/test_dry_run.py; one real run per script would cost minutes each.) :func:`background_runs`
makes the run in a child process while the rest of the suite runs (tests/background_runs.py); the tests read
what it left. Its folders (the tiny model and data it builds, its outputs) lie below a folder whose name holds
non-ASCII letters, a quote, braces, '#' and spaces, and its outputs below one with brackets too, each of which
once stopped the launcher with Hydra's parse error: the run shows that verl, Ray, transformers and HF datasets
take such paths whole (a data folder may not hold '[', '*' or '?', which HF datasets reads as a glob: the
launcher refuses it)."""

import json

import matplotlib.image
import pytest

from tests.run_scripts.scripts import run_script, script_environment
from verl_ext.plotting import plot_main

# the extended tier (CI's second session, `pytest -m extended`): the README's command stays within its 20 minutes
# (docs/testing.md); every script's composed configuration is checked by the dry run, tests/run_scripts/test_dry_run.py
pytestmark = [pytest.mark.e2e, pytest.mark.extended]
BACKGROUND_MINUTES = 3.5  # how long background_runs took (two cores, under the suite's load): the queue's order
BACKGROUND_PEAK_GIB = 6  # the memory its runs take at their peak (PSS), for the queue's pairing


def training_steps(metrics_file):
    records = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    return {record["step"]: record["data"] for record in records if "critic/score/mean" in record["data"]}, records


# legitimate folder names Hydra's unquoted grammar cannot carry (the first also holds data files)
ODD_FOLDER = "offpolicy_grpo dé'jà {x} #1"
ODD_OUTPUTS = "outputs [v] ü"

# name -> (script, the folder below which its files go, its outputs folder there, its extra variables; a
# relative VERL_EXT_TINY_ASSETS is made a folder below the run's folder: the tiny model and data built there)
SMOKE_RUNS = {
    "offpolicy_grpo": ("gsm8k/offpolicy_grpo.sh", ODD_FOLDER, ODD_OUTPUTS,
                       {"SETTINGS": "sync_interval_10", "VERL_EXT_TINY_ASSETS": "tiny ü"}),
}


def background_runs(root):
    """The script for real, in a child process (tests/background_runs.py): per run its exit status, the ends of its
    output and its metrics folder, which the tests check."""
    results = {}
    for name, (script, folder, outputs, extra) in SMOKE_RUNS.items():
        extra = dict(extra, OUTPUT_DIR=str(root / folder / outputs))
        if "VERL_EXT_TINY_ASSETS" in extra:
            extra["VERL_EXT_TINY_ASSETS"] = str(root / folder / extra["VERL_EXT_TINY_ASSETS"])
        env = script_environment(root / folder, VERL_EXT_CPU_SMOKE="1", **extra)
        result = run_script(script, env=env, timeout=900)
        results[name] = {
            "returncode": result.returncode,
            "output_tail": result.stdout[-3000:] + result.stderr[-3000:],
            "metrics": root / folder / outputs / "cpu-smoke" / "metrics",
        }
    return results


@pytest.fixture(scope="module")
def runs(request):
    return request.getfixturevalue("background_results")


def smoke(runs, name):
    result = runs[name]
    assert result["returncode"] == 0, result["output_tail"]
    return result["metrics"]


def test_offpolicy_grpo_script_runs_on_cpu_and_its_metrics_plot(runs, tmp_path):
    metrics = smoke(runs, "offpolicy_grpo")
    folder = metrics / "gsm8k-offpolicy-grpo"
    steps, records = training_steps(folder / "offpolicy_grpo-zvm-sync_interval_10.jsonl")
    assert sorted(steps) == [1, 2]  # capped at 2 steps
    assert [steps[step]["staleness/lag"] for step in (1, 2)] == [0, 1]  # the schedule of sync_interval=10
    assert all("actor/behaviour_ratio_mean" in data for data in steps.values())  # offpolicy_grpo's own metric
    assert all("actor/kl_loss" in data for data in steps.values())  # KL to the initial policy, measured
    assert max(data["actor/grad_norm"] for data in steps.values()) > 0
    assert all("staleness/zero_variance_groups_removed" in data for data in steps.values())  # masking is on
    assert any(key.startswith("val-core/") for record in records for key in record["data"])  # GSM8k evaluates
    description = json.loads((folder / "offpolicy_grpo-zvm-sync_interval_10.run.json").read_text())
    assert (description["run"], description["group"], description["cpu_smoke"]) == ("offpolicy_grpo-zvm", "sync_interval_10", True)

    assert plot_main([str(folder), "--out", str(tmp_path / "plots")]) == 0
    assert matplotlib.image.imread(tmp_path / "plots" / "gsm8k-offpolicy-grpo.png").shape[1] > 500
    assert ODD_OUTPUTS in str(metrics)  # the metrics file verl wrote below the odd folder, where the launcher said
