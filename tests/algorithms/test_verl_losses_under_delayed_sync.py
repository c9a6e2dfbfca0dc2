"""verl's own policy losses under verl-ext's ``delayed_sync`` trainer mode, pi_old = the behaviour policy.

Each name in verl 0.9.1's policy-loss registry (read from the registry, so a loss verl adds is checked too) goes
through the dry run (:func:`verl_ext.preflight.preflight`: Hydra compose, verl's ``validate_config`` and verl-ext's
driver checks, exactly what ``main_ppo``'s driver runs before Ray) as a user writes it: a run of the launcher
with a preset, a stale setting and ``policy_loss.loss_mode=<verl's loss>``. With ``bypass_mode=true`` verl's v1
trainer hands every loss the rollout's log-probs as ``old_log_prob`` (verl/trainer/ppo/v1/trainer_base.py,
``_compute_old_log_prob``) and computes no IS weights, so each ratio is pi_theta / behaviour; real steps of some
of these losses under delayed_sync are in tests/staleness/test_e2e_cpu.py.

Excluded, with the reason: ``bypass_mode`` (verl's internal loss: refused, see
test_verls_internal_bypass_loss_is_refused_naming_what_to_use).
"""

import pytest

from tests.run_scripts.scripts import planned_runs
from verl_ext import preflight
from verl_ext.algorithms.registry import POLICY_LOSSES

LOSS_MODE = "actor_rollout_ref.actor.policy_loss.loss_mode"
DRO_BETA = "actor_rollout_ref.actor.policy_loss.dro_beta"
EXCLUDED = {"bypass_mode": "verl's legacy trainer's stand-in for loss_mode; under trainer.use_v1 it ignores algorithm.rollout_correction"}
# what a loss needs beyond the preset: verl's dro has no usable default (dro_beta: null)
NEEDS = {"dro": (f"{DRO_BETA}=0.2",)}
SETTING = "sync_interval_64"


def verl_losses() -> list[str]:
    import verl  # noqa: F401  (the plugin registers verl-ext's losses beside verl's)
    from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY

    return sorted(set(POLICY_LOSS_REGISTRY) - set(POLICY_LOSSES))


def test_the_registry_holds_the_losses_users_try_on_stale_data():
    assert {"vanilla", "gspo", "cispo", "sapo", "dppo_kl", "dppo_tv", "dro"} <= set(verl_losses())
    assert set(EXCLUDED) <= set(verl_losses())


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    """{loss: PreflightResult} of `run gsm8k grpo sync_interval_64 loss_mode=<loss>` for every verl loss."""
    tmp_path = tmp_path_factory.mktemp("verl_losses")
    runs = []
    for loss in verl_losses():
        cell, = planned_runs(tmp_path, "run", "gsm8k", "grpo", SETTING, f"{LOSS_MODE}={loss}", *NEEDS.get(loss, ()))
        runs.append((loss, cell.composed))
    return {result.name: result for result in preflight.preflight_many(runs)}


@pytest.mark.parametrize("loss", [loss for loss in verl_losses() if loss not in EXCLUDED])
def test_verl_loss_composes_with_delayed_sync_and_the_behaviour_policy(dry_runs, loss):
    result = dry_runs[loss]
    assert result.ok, result.error
    s = result.settings
    assert s[LOSS_MODE] == loss
    assert s["trainer.v1.trainer_mode"] == "delayed_sync"
    assert (s["trainer.v1.delayed_sync.sync_interval"], s["trainer.v1.delayed_sync.offline"]) == (64, False)
    assert s["algorithm.rollout_correction.bypass_mode"] is True  # pi_old = the behaviour policy
    assert s["gradient_steps_per_batch"] == 1


def test_verls_internal_bypass_loss_is_refused_naming_what_to_use(dry_runs):
    result = dry_runs["bypass_mode"]
    assert not result.ok
    assert "policy_loss.loss_mode='bypass_mode' is verl's internal loss" in result.error
    assert "every algorithm.rollout_correction key" in result.error and "vanilla" in result.error


def test_dro_without_its_beta_fails_in_the_driver_naming_the_key(tmp_path):
    cell, = planned_runs(tmp_path, "run", "gsm8k", "grpo", SETTING, f"{LOSS_MODE}=dro")
    result = preflight.check_run(cell.title, cell.composed)
    assert not result.ok
    assert f"{DRO_BETA}=None is invalid: allowed values are a finite number > 0 with loss_mode='dro'" in result.error
