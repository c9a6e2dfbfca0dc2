"""No accepted-but-ignored loss keys: a verl-ext hyperparameter the chosen loss does not read is refused at a
non-default value, naming the key and the losses that read it; the recipe's defaults pass with every loss."""

import pytest
import verl  # noqa: F401  (first, as in every verl process: its plugin entry point registers verl-ext's losses)
from omegaconf import OmegaConf

from verl_ext.algorithms.loss_config import OWN_KEYS, RECPolicyLossConfig
from verl_ext.algorithms.registry import POLICY_LOSSES
from verl_ext.config_values import ConfigError
from verl_ext.recipe import CONFIG_NAME, config_dir

# Written out from the papers (docs/algorithms.md), not read from the catalog: who reads which key.
READERS = {
    "outer_clip_ratio_low": ["rec_ring_is", "rec_ring_nois"],
    "outer_clip_ratio_high": ["rec_ring_is", "rec_ring_nois"],
    "reg_coef": ["asymre", "opmd"],
    "reg_form": ["opmd"],
    "weight_temperature": ["red_weight"],
    "topr_ratio_level": ["topr"],
    "m2_threshold": ["m2po"],
    "m2_tokens": ["m2po"],
}
OTHER_VALUES = {"outer_clip_ratio_low": 0.7, "outer_clip_ratio_high": 3.0, "reg_coef": 0.05, "reg_form": "token",
                "weight_temperature": 0.5, "topr_ratio_level": "token", "m2_threshold": 0.1, "m2_tokens": "all"}


def test_the_table_above_covers_every_key_of_ours():
    assert sorted(READERS) == sorted(OWN_KEYS)


@pytest.mark.parametrize("loss_mode", [*POLICY_LOSSES, "vanilla"])
@pytest.mark.parametrize("name", sorted(READERS))
def test_a_key_is_accepted_only_by_the_losses_that_read_it(loss_mode, name):
    value = OTHER_VALUES[name]
    if loss_mode in READERS[name]:
        assert getattr(RECPolicyLossConfig(loss_mode=loss_mode, **{name: value}), name) == value
        return
    with pytest.raises(ConfigError) as error:
        RECPolicyLossConfig(loss_mode=loss_mode, **{name: value})
    message = str(error.value)
    assert message.startswith(f"actor_rollout_ref.actor.policy_loss.{name}={value!r} is invalid")
    assert f"loss_mode={loss_mode!r}, which does not read it" in message
    assert f"Only {READERS[name]} read it" in message


def test_the_recipe_configs_values_are_the_defaults_so_every_loss_accepts_them():
    node = OmegaConf.load(config_dir() / f"{CONFIG_NAME}.yaml").actor_rollout_ref.actor.policy_loss
    recipe = {name: node[name] for name in OWN_KEYS}
    for loss_mode in POLICY_LOSSES:
        config = RECPolicyLossConfig(loss_mode=loss_mode, **recipe)
        assert {name: getattr(config, name) for name in OWN_KEYS} == recipe
