"""A lab run: the run scripts' presets and settings under the lab's batch, named in the one run-name format."""

import pytest

from verl_ext.algorithms.presets import ALGORITHMS, parse_algorithm
from verl_ext.runs.names import SAFE
from verl_ext.staleness.setting import OFFLINE, ON_POLICY, Setting, parse_setting
from verl_ext.lab.plan import lab_run, plan_runs
from verl_ext.runs.run import Run


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_each_lab_run_composes_and_verl_builds_its_actor_config(name):
    """The run's overrides through the recipe config (Hydra) and verl's actor config with verl-ext's checks."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
    from verl.utils.config import omega_conf_to_dataclass

    from tests.recipe_config import compose_recipe
    from verl_ext.staleness.config import delayed_sync_config_from

    run = lab_run(parse_algorithm(name), Setting(20, 0), seed=3, steps=5, learning_rate=0.02)
    config = compose_recipe(*run.overrides)
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    assert actor.policy_loss.loss_mode == ALGORITHMS[name].loss in POLICY_LOSS_REGISTRY
    assert config.algorithm.adv_estimator == ALGORITHMS[name].estimator
    assert ALGORITHMS[name].estimator in ADV_ESTIMATOR_REGISTRY
    assert actor.optim.lr == 0.02 and actor.use_kl_loss and actor.kl_loss_coef == 0
    assert config.data.seed == 3 and config.actor_rollout_ref.rollout.seed == 3
    assert config.actor_rollout_ref.actor.data_loader_seed == 3 and config.algorithm.red_drop_seed == 3
    block = delayed_sync_config_from(config)
    assert (block.sync_interval, block.sync_offset, block.offline, block.measure_mismatch) == (20, 0, False, False)


def test_a_lab_run_is_the_presets_overrides_plus_the_labs_own():
    run = lab_run(parse_algorithm("rec_ring_nois@0.3_0.5"), parse_setting("mixed"), seed=1, steps=4, extra_overrides=("a.b=1",))
    overrides = run.overrides
    position = {item: index for index, item in enumerate(overrides)}
    preset = run.algorithm.overrides() + run.setting.overrides()
    assert [position[item] for item in preset] == sorted(position[item] for item in preset)  # all there, in order
    assert "trainer.v1.delayed_sync.measure_mismatch=false" in overrides and overrides[-1] == "a.b=1"


def test_pi_old_is_the_behaviour_policy_for_every_preset_but_offpolicy_grpo_unless_overridden():
    behaviour = {name for name in ALGORITHMS if lab_run(parse_algorithm(name), Setting(20, 0)).pi_old_is_behaviour}
    assert set(ALGORITHMS) - behaviour == {"offpolicy_grpo"}
    flipped = lab_run(parse_algorithm("topr"), Setting(20, 0), extra_overrides=("algorithm.rollout_correction.bypass_mode=False",))
    assert not flipped.pi_old_is_behaviour


def test_run_names_are_the_one_format_unique_and_safe():
    assert lab_run(parse_algorithm("rec_oneside_nois@0.6_2.0"), Setting(20, 0), seed=1, steps=25).name == (
        "rec_oneside_nois@0.6_2-lr0.001-sync_interval_20-T25-seed1")
    assert lab_run(parse_algorithm("reinforce"), OFFLINE, steps=3, prompts_per_step=8).name == (
        "rec_reinforce-lr0.001-offline-T3-P8-seed0")
    runs = plan_runs(
        [parse_algorithm(spec) for spec in ("rec_oneside_nois", "rec_oneside_nois@0.6_2", "rec_reinforce")],
        [ON_POLICY, Setting(20, 0), Setting(1, 10), OFFLINE],
        seeds=[0, 1],
    )
    names = [run.name for run in runs]
    assert len(set(names)) == len(names) == 24 and all(SAFE.match(name) for name in names)
    run = runs[0]
    assert Run(run.name).name == run.name  # the run value takes the '@' of the one format


def test_runs_that_would_share_a_name_are_refused():
    with pytest.raises(ValueError, match="the lab would run rec_reinforce-lr0.001-on_policy-T50-seed0 twice"):
        plan_runs([parse_algorithm("rec_reinforce")], [ON_POLICY, parse_setting("sync_interval_1")], seeds=[0])


def test_bad_knobs_are_refused_naming_them():
    with pytest.raises(ValueError, match="sync_interval=0 is invalid: allowed values are an integer >= 1"):
        Setting(0, 0)
    with pytest.raises(ValueError, match="prompts_per_step must be >= 1"):
        lab_run(parse_algorithm("grpo"), prompts_per_step=0)
