"""The plugin loads through verl's entry point in a fresh process, and ``verl-ext`` reports on it.

Two fresh processes (the plugin's loading is per process, so these cannot run in pytest's): one imports
verl the way a user's process does, reads the registries, then runs the doctor (``verl-ext is ready``);
the other runs ``python -m verl_ext.cli doctor`` with verl told not to load the plugin (it must fail).
``verl-ext list`` reads no registry state, so it runs in this process.
"""

import json
import os
import subprocess
import sys

from verl_ext.algorithms.registry import ESTIMATORS, POLICY_LOSSES
from verl_ext.cli import main as cli_main

import pytest

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

REGISTRIES = "registries: "


def run(code_or_args, env_extra=None, module=False):
    env = {**os.environ, **(env_extra or {})}
    command = [sys.executable, "-m", "verl_ext.cli", *code_or_args] if module else [sys.executable, "-c", code_or_args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd="/")


def test_plain_import_verl_registers_everything_and_the_doctor_passes_in_a_fresh_process():
    result = run(
        "import json, sys, verl\n"
        "from verl.trainer.ppo import core_algos\n"
        f"print({REGISTRIES!r} + json.dumps([sorted(core_algos.POLICY_LOSS_REGISTRY), sorted(core_algos.ADV_ESTIMATOR_REGISTRY)]))\n"
        "from verl_ext.cli import main\n"  # only now: the registries above were filled by `import verl` alone
        "sys.exit(main(['doctor']))\n",
        env_extra={"VERL_PLATFORM": ""},  # verl's own auto-detection, as on a machine the user has not configured
    )
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith(REGISTRIES))
    losses, estimators = json.loads(line[len(REGISTRIES):])
    assert set(POLICY_LOSSES) <= set(losses)
    assert set(ESTIMATORS) <= set(estimators)
    assert "verl-ext is ready" in result.stdout
    # on this CPU machine: the doctor's own line says so, not verl's fallback warning or its engines' import warnings
    output = result.stdout + result.stderr
    assert "ok   accelerator: none found by verl's GPU platforms" in result.stdout
    for noise in ("No supported accelerator detected", "Falling back to 'nvidia'", "UserWarning", "No CUDA runtime"):
        assert noise not in output, noise


def test_doctor_fails_loudly_when_verl_does_not_load_the_plugin():
    result = run(["doctor"], env_extra={"VERL_USE_EXTERNAL_PLUGINS": "none"}, module=True)
    assert result.returncode == 1
    assert "FAIL" in result.stdout and "rec_oneside_nois" in result.stdout


def test_list_names_every_algorithm_with_keys_and_recipe_defaults(capsys):
    assert cli_main(["list", "--format", "json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(POLICY_LOSSES) | set(ESTIMATORS)
    ring = rows["rec_ring_nois"]
    assert ring["paper_name"] == "REC-Ring-NoIS"
    assert ring["select_with"] == "actor_rollout_ref.actor.policy_loss.loss_mode=rec_ring_nois"
    assert ring["keys"] == {
        "actor_rollout_ref.actor.clip_ratio_low": 0.2,
        "actor_rollout_ref.actor.clip_ratio_high": 0.2,
        "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low": 0.6,
        "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high": 2.0,
    }
    assert rows["opmd"]["keys"] == {
        "actor_rollout_ref.actor.policy_loss.reg_coef": 0.1,
        "actor_rollout_ref.actor.policy_loss.reg_form": "sequence",
    }
    assert rows["red_weight"]["keys"] == {"actor_rollout_ref.actor.policy_loss.weight_temperature": 1.0}
    assert rows["topr"]["keys"] == {"actor_rollout_ref.actor.policy_loss.topr_ratio_level": "sequence"}
    assert rows["m2po"]["keys"] == {
        "actor_rollout_ref.actor.policy_loss.m2_threshold": 0.04,
        "actor_rollout_ref.actor.policy_loss.m2_tokens": "trust_region",
    }
    assert rows["topr"]["select_with"] == "actor_rollout_ref.actor.policy_loss.loss_mode=topr"
