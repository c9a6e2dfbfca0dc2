"""``trainer.v1.delayed_sync``: the recipe config composes with verl's Hydra config in each mode, passes
verl's validate_config, and bad values are rejected with the key and the allowed values."""

import pytest
from omegaconf import OmegaConf

from tests.recipe_config import OFFPOLICY_GRPO_OVERRIDES, compose_recipe
from verl_ext.staleness.config import DelayedSyncConfig, delayed_sync_config_from, read_delayed_sync_block
from verl_ext.staleness.schedule import StalenessSchedule

MODE = "trainer.v1.trainer_mode=delayed_sync"


def verl_validate(config):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


@pytest.mark.parametrize(
    "overrides,expected",
    [
        ((), DelayedSyncConfig()),
        (
            ("trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1"),
            DelayedSyncConfig(sync_interval=3, sync_offset=1),
        ),
        (("trainer.v1.delayed_sync.offline=true",), DelayedSyncConfig(offline=True)),
        (("trainer.v1.delayed_sync.measure_mismatch=false",), DelayedSyncConfig(measure_mismatch=False)),
        (("trainer.v1.delayed_sync.mismatch_forward_pass=true",), DelayedSyncConfig(mismatch_forward_pass=True)),
        (
            ("trainer.v1.delayed_sync.zero_variance_masking=true", "trainer.v1.delayed_sync.sync_interval=10"),
            DelayedSyncConfig(sync_interval=10, zero_variance_masking=True),
        ),
        # the off-policy GRPO experiment: verl's decoupled pi_old, IS weights, masking
        (
            (*OFFPOLICY_GRPO_OVERRIDES, "actor_rollout_ref.actor.policy_loss.loss_mode=offpolicy_grpo",
             "trainer.v1.delayed_sync.zero_variance_masking=true"),
            DelayedSyncConfig(zero_variance_masking=True),
        ),
        # a reward model in its own resource pool scores at sampling time
        (
            ("trainer.v1.delayed_sync.zero_variance_masking=true", "reward.reward_model.enable=true",
             "reward.reward_model.enable_resource_pool=true"),
            DelayedSyncConfig(zero_variance_masking=True),
        ),
    ],
)
def test_each_mode_composes_and_validates(overrides, expected):
    config = compose_recipe(MODE, *overrides)
    verl_validate(config)
    assert delayed_sync_config_from(config) == expected
    assert expected.schedule() == StalenessSchedule(expected.sync_interval, expected.sync_offset, expected.offline)


def test_recipe_defaults_are_verl_sync_semantics():
    config = compose_recipe()
    assert config.trainer.v1.trainer_mode == "sync"  # verl's default mode is untouched
    block = read_delayed_sync_block(config.trainer.v1.delayed_sync)
    assert block == DelayedSyncConfig()
    assert block.zero_variance_masking is False
    assert config.algorithm.rollout_correction.bypass_mode is True  # pi_old := behaviour log-probs


@pytest.mark.parametrize(
    "override,key,allowed",
    [
        ("trainer.v1.delayed_sync.sync_interval=0", "trainer.v1.delayed_sync.sync_interval=0", "an integer >= 1"),
        ("trainer.v1.delayed_sync.sync_interval=1.5", "trainer.v1.delayed_sync.sync_interval=1.5", "an integer >= 1"),
        ("trainer.v1.delayed_sync.sync_interval=true", "trainer.v1.delayed_sync.sync_interval=True", "an integer"),
        ("trainer.v1.delayed_sync.sync_offset=-2", "trainer.v1.delayed_sync.sync_offset=-2", "an integer >= 0"),
        ("trainer.v1.delayed_sync.sync_offset=abc", "trainer.v1.delayed_sync.sync_offset='abc'", "an integer >= 0"),
        ("trainer.v1.delayed_sync.offline=2", "trainer.v1.delayed_sync.offline=2", "true or false"),
        ("trainer.v1.delayed_sync.measure_mismatch=null", "measure_mismatch=None", "true or false"),
        ("actor_rollout_ref.hybrid_engine=null", "actor_rollout_ref.hybrid_engine=None", "true (engine colocated"),
        ("actor_rollout_ref.rollout.calculate_log_probs=false", "calculate_log_probs=False", "true"),
        ("algorithm.filter_groups.enable=true", "algorithm.filter_groups.enable=True", "false with delayed_sync"),
        ("trainer.v1.delayed_sync.zero_variance_masking=1", "zero_variance_masking=1", "true or false"),
        ("trainer.v1.sampler.sync_refill_failed_groups=true", "sync_refill_failed_groups=True", "false"),
        ("skip.rollout_tq.enable=true", "skip.rollout_tq.enable=True", "false with delayed_sync"),
        ("trainer.v1.sampler.custom_sampler.path=x.py", "custom_sampler.path='x.py'", "null with delayed_sync"),
    ],
)
def test_invalid_values_name_the_key_and_the_allowed_values(override, key, allowed):
    config = compose_recipe(MODE, override)
    with pytest.raises(ValueError) as error:
        delayed_sync_config_from(config)
    assert key in str(error.value)
    assert f"allowed values are {allowed}" in str(error.value)


def test_unknown_keys_are_rejected_with_the_allowed_keys():
    config = compose_recipe(MODE, "+trainer.v1.delayed_sync.sync_intervall=3")
    with pytest.raises(ValueError, match="unknown key.*sync_intervall.*allowed keys are sync_interval, sync_offset"):
        delayed_sync_config_from(config)


def test_another_trainer_mode_is_rejected():
    with pytest.raises(ValueError, match="trainer.v1.trainer_mode='sync' is invalid.*'delayed_sync'"):
        delayed_sync_config_from(compose_recipe())


def test_a_config_without_the_block_takes_the_defaults():
    config = compose_recipe(MODE)
    with_block_removed = OmegaConf.to_container(config)
    del with_block_removed["trainer"]["v1"]["delayed_sync"]
    assert delayed_sync_config_from(OmegaConf.create(with_block_removed)) == DelayedSyncConfig()


@pytest.mark.parametrize(
    "overrides,key,allowed",
    [
        (("actor_rollout_ref.rollout.n=1",), "actor_rollout_ref.rollout.n=1", "an integer >= 2 with"),
        (
            ("reward.reward_model.enable=true",),
            "reward.reward_model.enable_resource_pool=False",
            "true with trainer.v1.delayed_sync.zero_variance_masking=true when reward.reward_model.enable=true",
        ),
    ],
)
def test_zero_variance_masking_needs_groups_and_rewards_at_sampling_time(overrides, key, allowed):
    masking = "trainer.v1.delayed_sync.zero_variance_masking=true"
    with pytest.raises(ValueError) as error:
        delayed_sync_config_from(compose_recipe(MODE, masking, *overrides))
    assert key in str(error.value) and f"allowed values are {allowed}" in str(error.value)
    # the same config without masking is accepted
    assert delayed_sync_config_from(compose_recipe(MODE, *overrides)) == DelayedSyncConfig()


def test_verls_group_filter_error_points_to_zero_variance_masking():
    with pytest.raises(ValueError, match="trainer.v1.delayed_sync.zero_variance_masking=true removes"):
        delayed_sync_config_from(compose_recipe(MODE, "algorithm.filter_groups.enable=true"))


@pytest.mark.parametrize("mode", [MODE, "trainer.v1.trainer_mode=sync"])
@pytest.mark.parametrize("override,key,allowed", [
    ("trainer.v1.delayed_sync.sync_interval=20", "trainer.v1.delayed_sync.sync_interval=20", "1 (the default) with"),
    ("trainer.v1.delayed_sync.sync_offset=4", "trainer.v1.delayed_sync.sync_offset=4", "0 (the default) with"),
])
def test_offline_with_a_delayed_schedule_is_a_contradiction_in_every_mode(mode, override, key, allowed):
    """offline ignores sync_interval and sync_offset: rejected, not silently dropped (the dry run accepted it)."""
    from verl_ext.config_values import ConfigError
    from verl_ext.staleness.config import check_staleness_keys

    config = compose_recipe(mode, "trainer.v1.delayed_sync.offline=true", override)
    with pytest.raises(ConfigError) as error:
        check_staleness_keys(config)
    assert key in str(error.value) and f"allowed values are {allowed} trainer.v1.delayed_sync.offline=true" in str(error.value)


def test_zero_variance_masking_outside_delayed_sync_is_rejected():
    from verl_ext.config_values import ConfigError
    from verl_ext.staleness.config import check_staleness_keys

    with pytest.raises(ConfigError, match="zero_variance_masking=True is invalid: allowed values are false outside"):
        check_staleness_keys(compose_recipe("trainer.v1.delayed_sync.zero_variance_masking=true"))
    check_staleness_keys(compose_recipe(MODE, "trainer.v1.delayed_sync.zero_variance_masking=true"))


@pytest.mark.parametrize("steps", ["1e9", "0", "nan"])
def test_delayed_sync_counts_whole_steps(steps):
    """The schedule counts trainer.total_training_steps: Hydra reads 1e9 as a float, which failed in the
    TaskRunner (after Ray); now the driver names the key. Huge integers are fine (closed-form summaries)."""
    from verl_ext.config_values import ConfigError
    from verl_ext.staleness.config import check_staleness_keys

    with pytest.raises(ConfigError, match=f"trainer.total_training_steps={steps if steps != '1e9' else '1000000000.0'} is invalid"):
        check_staleness_keys(compose_recipe(MODE, f"trainer.total_training_steps={steps}"))
    check_staleness_keys(compose_recipe(MODE, "trainer.total_training_steps=1000000000"))


@pytest.mark.parametrize("overrides, message", [
    (("trainer.v1.delayed_sync.measure_mismatch=false",),
     "mismatch_forward_pass=True is invalid: allowed values are false with trainer.v1.delayed_sync.measure_mismatch=false"),
    (("algorithm.rollout_correction.bypass_mode=false",),
     "mismatch_forward_pass=True is invalid: allowed values are false with algorithm.rollout_correction.bypass_mode=false"),
])
def test_the_separate_mismatch_pass_is_refused_where_it_would_change_nothing(overrides, message):
    config = compose_recipe(MODE, "trainer.v1.delayed_sync.mismatch_forward_pass=true", *overrides)
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        delayed_sync_config_from(config)
