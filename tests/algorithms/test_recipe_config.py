"""The recipe config composes with verl's Hydra config, passes validate_config, builds the actor config
with our keys, and rejects bad values in the driver, naming the key and the allowed values."""

import subprocess
import sys
import warnings

import pytest
from hydra.errors import InstantiationException
from verl.trainer.main_ppo import need_critic, need_reference_policy
from verl.utils.config import validate_config

from tests.recipe_config import OFFPOLICY_GRPO_OVERRIDES, REPO, RECIPE_CONFIG_DIR, actor_config, compose_recipe
from verl_ext.algorithms.registry import ESTIMATORS, POLICY_LOSSES
from verl_ext.algorithms.loss_config import ConfigError, RECPolicyLossConfig

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)


def validate(*overrides):
    config = compose_recipe(*overrides)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Disabled critic")
        validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    return config


def test_recipe_defaults_compose_and_validate():
    config = validate()
    assert config.algorithm.adv_estimator == "rec"
    assert config.algorithm.rollout_correction.bypass_mode is True  # pi_old = behaviour policy
    assert config.trainer.v1.delayed_sync.sync_interval == 1
    policy_loss = actor_config().policy_loss
    assert isinstance(policy_loss, RECPolicyLossConfig)
    assert (policy_loss.loss_mode, policy_loss.outer_clip_ratio_low, policy_loss.outer_clip_ratio_high) == ("rec_oneside_nois", 0.6, 2.0)
    assert (policy_loss.reg_coef, policy_loss.weight_temperature) == (0.1, 1.0)


@pytest.mark.parametrize("loss_mode", sorted(POLICY_LOSSES))
def test_every_loss_validates_with_its_documented_config(loss_mode):
    extra = OFFPOLICY_GRPO_OVERRIDES if loss_mode == "offpolicy_grpo" else ()
    validate(f"actor_rollout_ref.actor.policy_loss.loss_mode={loss_mode}", *extra)


@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
def test_every_estimator_validates(estimator):
    validate(f"algorithm.adv_estimator={estimator}", "actor_rollout_ref.actor.policy_loss.loss_mode=rec_oneside_nois")


def test_overridden_keys_reach_the_built_actor_config():
    actor = actor_config(
        "actor_rollout_ref.actor.policy_loss.loss_mode=rec_ring_nois",
        "actor_rollout_ref.actor.clip_ratio_low=0.3",
        "actor_rollout_ref.actor.clip_ratio_high=0.4",
        "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low=0.7",
        "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high=3.0",
    )
    policy_loss = actor.policy_loss  # the clipping range stays where verl (and the losses) read it: actor.clip_ratio_*
    assert (policy_loss.loss_mode, actor.clip_ratio_low, actor.clip_ratio_high) == ("rec_ring_nois", 0.3, 0.4)
    assert (policy_loss.outer_clip_ratio_low, policy_loss.outer_clip_ratio_high) == (0.7, 3.0)
    assert actor_config("actor_rollout_ref.actor.policy_loss.loss_mode=opmd",
                        "actor_rollout_ref.actor.policy_loss.reg_coef=0.2").policy_loss.reg_coef == 0.2
    assert actor_config("actor_rollout_ref.actor.policy_loss.loss_mode=red_weight",
                        "actor_rollout_ref.actor.policy_loss.weight_temperature=0.5").policy_loss.weight_temperature == 0.5


BAD_CONFIGS = [
    (("actor_rollout_ref.actor.clip_ratio_low=1.5",), "clip_ratio_low=1.5"),
    (("actor_rollout_ref.actor.clip_ratio_high=-0.1",), "clip_ratio_high=-0.1"),
    (
        ("actor_rollout_ref.actor.policy_loss.loss_mode=rec_ring_is", "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low=0.1"),
        "outer_clip_ratio_low=0.1 lies inside the inner band",
    ),
    (
        (
            "actor_rollout_ref.actor.policy_loss.loss_mode=rec_ring_nois",
            "actor_rollout_ref.actor.clip_ratio_high=2.5",
        ),
        "outer_clip_ratio_high=2.0 lies inside the inner band",
    ),
    (("actor_rollout_ref.actor.policy_loss.reg_coef=-0.1",), "reg_coef=-0.1 is invalid: allowed values are a finite number >= 0"),
    (("actor_rollout_ref.actor.policy_loss.weight_temperature=0",),
     "weight_temperature=0 is invalid: allowed values are a finite number > 0"),
    (
        ("actor_rollout_ref.actor.policy_loss.loss_mode=topr", "actor_rollout_ref.actor.policy_loss.topr_ratio_level=trajectory"),
        "topr_ratio_level='trajectory' is invalid: allowed values are one of ['sequence', 'token']",
    ),
    (
        ("actor_rollout_ref.actor.policy_loss.loss_mode=m2po", "actor_rollout_ref.actor.policy_loss.m2_tokens=harmful"),
        "m2_tokens='harmful' is invalid: allowed values are one of ['trust_region', 'all']",
    ),
    (
        ("actor_rollout_ref.actor.policy_loss.loss_mode=m2po", "actor_rollout_ref.actor.policy_loss.m2_threshold=-0.01"),
        "m2_threshold=-0.01 is invalid: allowed values are a finite number >= 0",
    ),
    (
        ("actor_rollout_ref.actor.policy_loss.loss_mode=m2po", "actor_rollout_ref.actor.policy_loss.m2_threshold=nan"),
        "m2_threshold=nan is invalid",
    ),
    (("actor_rollout_ref.actor.policy_loss.loss_mode=topr", "algorithm.rollout_correction.bypass_mode=false"), "bypass_mode=true"),
    (("actor_rollout_ref.actor.policy_loss.loss_mode=m2po", "algorithm.rollout_correction.bypass_mode=false"), "bypass_mode=true"),
    (("algorithm.rollout_correction.bypass_mode=false",), "bypass_mode=true"),
    (("actor_rollout_ref.actor.policy_loss.loss_mode=rec_onesided",), "rec_onesided' is not a registered policy loss. Allowed:"),
    (("algorithm.adv_estimator=rec_drop",), "rec_drop' is not a registered advantage estimator. Allowed:"),
    (("algorithm.adv_estimator=red_drop", "actor_rollout_ref.actor.policy_loss.loss_mode=opmd"), "RED-Drop"),
    (("trainer.use_v1=false",), "trainer.use_v1=false"),
    (("actor_rollout_ref.actor.policy_loss.loss_mode=offpolicy_grpo",), "bypass_mode=true leaves no pi_k"),
    (
        ("actor_rollout_ref.actor.policy_loss.loss_mode=offpolicy_grpo", "algorithm.rollout_correction.bypass_mode=false"),
        "rollout_is=None",
    ),
    (
        (
            "actor_rollout_ref.actor.policy_loss.loss_mode=offpolicy_grpo",
            "algorithm.rollout_correction.bypass_mode=false",
            "algorithm.rollout_correction.rollout_is=token",
        ),
        "rollout_is_threshold=2.0 truncates",
    ),
]


@pytest.mark.parametrize("overrides,message", BAD_CONFIGS, ids=[message for _, message in BAD_CONFIGS])
def test_bad_config_fails_in_validate_config(overrides, message):
    # Hydra wraps the ConfigError raised while it instantiates the policy-loss config; the message stays.
    with pytest.raises((ConfigError, InstantiationException), match=message.replace("(", r"\(").replace("[", r"\[").replace("'", ".")):
        validate(*overrides)


def test_bad_config_stops_main_ppo_before_ray_starts():
    """The real entry point: the error comes from the driver's validate_config, before any worker."""
    command = [
        sys.executable, "-m", "verl.trainer.main_ppo",
        f"--config-path={RECIPE_CONFIG_DIR}", "--config-name=rec_trainer",
        "actor_rollout_ref.model.path=unused", "trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.actor.policy_loss.loss_mode=rec_ring_is",
        "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high=0.1",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "outer_clip_ratio_high=0.1 lies inside the inner band" in output
    assert "ray init kwargs" not in output  # run_ppo never started Ray


def test_offpolicy_grpo_with_zero_variance_masking_validates():
    """The documented off-policy GRPO setting: pi_k + alpha, and verl's group filter for zero-variance groups."""
    config = validate(
        "actor_rollout_ref.actor.policy_loss.loss_mode=offpolicy_grpo",
        *OFFPOLICY_GRPO_OVERRIDES,
        "algorithm.filter_groups.enable=true",
        "algorithm.filter_groups.metric=reward",
    )
    assert config.algorithm.filter_groups.enable is True
