"""The algorithm presets: derived from the catalog, parsed from every spelling users write, written one way."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_ext.algorithms.registry import ESTIMATORS, POLICY_LOSSES
from verl_ext.algorithms.presets import (
    ALGORITHMS,
    ALIASES,
    DEFAULT_EPSILONS,
    AlgorithmChoice,
    parse_algorithm,
    parse_algorithms,
)
from verl_ext.overrides import override_key

CLIPPED = sorted(name for name, preset in ALGORITHMS.items() if preset.clipped)


def test_every_registered_loss_and_estimator_is_a_preset_of_its_own_name():
    assert set(POLICY_LOSSES) | set(ESTIMATORS) - {"rec"} <= set(ALGORITHMS)
    for name, spec in POLICY_LOSSES.items():
        assert ALGORITHMS[name].loss == name
        assert ALGORITHMS[name].clipped == ("actor_rollout_ref.actor.clip_ratio_low" in spec.keys)
    assert (ALGORITHMS["red_drop"].estimator, ALGORITHMS["red_drop"].loss) == ("red_drop", "rec_reinforce")
    assert (ALGORITHMS["grpo"].estimator, ALGORITHMS["grpo"].loss) == ("grpo", "rec_oneside_is")
    # the papers' advantages: GRPO's std-normalised ones for off-policy GRPO and M2PO, r - mean for the others
    assert {name for name, preset in ALGORITHMS.items() if preset.estimator == "grpo"} == {"grpo", "offpolicy_grpo", "m2po"}
    assert ALIASES == {"reinforce": "rec_reinforce"}


def overrides_of(spec: str) -> dict[str, str]:
    overrides = parse_algorithm(spec).overrides()
    keys = [override_key(override) for override in overrides]
    assert len(keys) == len(set(keys)), f"{spec}: a key set twice in {overrides}"
    return dict(override.split("=", 1) for override in overrides)


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("rec_ring_nois", {"actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low": "0.6",
                           "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high": "2.0"}),
        ("rec_gspo_is@6e-4_8e-4", {"actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean",
                                   "actor_rollout_ref.actor.clip_ratio_low": "0.0006"}),
        ("opmd", {"actor_rollout_ref.actor.policy_loss.reg_coef": "0.1"}),
        ("asymre", {"actor_rollout_ref.actor.policy_loss.reg_coef": "0.1"}),
        ("red_weight", {"actor_rollout_ref.actor.policy_loss.weight_temperature": "1.0"}),
        ("topr", {"algorithm.adv_estimator": "rec", "actor_rollout_ref.actor.policy_loss.loss_mode": "topr",
                  "algorithm.rollout_correction.bypass_mode": "true"}),
        ("m2po", {"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": "true",
                  "actor_rollout_ref.actor.policy_loss.m2_threshold": "0.04", "algorithm.rollout_correction.bypass_mode": "true"}),
        ("grpo", {"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": "true",
                  "actor_rollout_ref.actor.policy_loss.loss_mode": "rec_oneside_is"}),
        ("offpolicy_grpo", {"algorithm.rollout_correction.bypass_mode": "false",
                            "algorithm.rollout_correction.rollout_is": "token"}),
        ("reinforce", {"algorithm.adv_estimator": "rec", "actor_rollout_ref.actor.policy_loss.loss_mode": "rec_reinforce",
                       "algorithm.rollout_correction.bypass_mode": "true"}),
    ],
)
def test_each_preset_states_the_papers_settings(spec, expected):
    overrides = overrides_of(spec)
    assert {key: overrides.get(key) for key in expected} == expected


def test_only_the_losses_that_read_a_key_set_it():
    """The presets set no key the loss ignores (verl_ext.algorithms.loss_config refuses such a key at a non-default value)."""
    reads = {"reg_coef": {"opmd", "asymre"}, "reg_form": set(), "weight_temperature": {"red_weight"},
             "outer_clip_ratio_low": {"rec_ring_is", "rec_ring_nois"}, "m2_threshold": {"m2po"}, "m2_tokens": set(),
             "topr_ratio_level": set()}
    for name in ALGORITHMS:
        overrides = overrides_of(name)
        loss = ALGORITHMS[name].loss
        for key, losses in reads.items():
            assert (f"actor_rollout_ref.actor.policy_loss.{key}" in overrides) == (loss in losses), (name, key)


def test_clipped_names_take_the_default_or_given_range_and_unclipped_ones_none():
    assert parse_algorithm("rec_oneside_nois") == AlgorithmChoice("rec_oneside_nois", DEFAULT_EPSILONS)
    assert parse_algorithm("rec_oneside_nois", (0.3, 0.4)).epsilons == (0.3, 0.4)
    assert parse_algorithm("rec_oneside_nois@0.6_2.0").epsilons == (0.6, 2.0)
    assert parse_algorithm("rec_reinforce").epsilons is None
    assert parse_algorithm(" grpo ").estimator == "grpo"


def test_the_alias_resolves_before_anything_so_labels_use_the_preset_name():
    assert parse_algorithm("reinforce") == parse_algorithm("rec_reinforce") == AlgorithmChoice("rec_reinforce")
    assert parse_algorithm("reinforce").label == "rec_reinforce"
    with pytest.raises(ValueError, match="rec_reinforce given twice"):
        parse_algorithms("reinforce rec_reinforce")


def test_labels_name_a_non_default_range_only_and_numbers_one_way():
    assert parse_algorithm("rec_oneside_nois").label == "rec_oneside_nois"
    assert parse_algorithm("rec_oneside_nois@0.2_0.2").label == "rec_oneside_nois"
    assert parse_algorithm("rec_oneside_nois@0.6_2.0").label == "rec_oneside_nois@0.6_2"
    assert parse_algorithm("rec_oneside_nois@0.60_2").label == "rec_oneside_nois@0.6_2"
    assert parse_algorithm("rec_gspo_is@6e-4_8e-4").label == "rec_gspo_is@0.0006_0.0008"
    assert parse_algorithm("grpo", (0.6, 2.0)).label == "grpo@0.6_2"


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(CLIPPED),
    low=st.floats(0, 1, allow_nan=False).map(lambda x: float(f"{x:g}")),
    high=st.floats(0, 50, allow_nan=False).map(lambda x: float(f"{x:g}")),
)
def test_a_label_parses_back_to_its_choice(name, low, high):
    choice = parse_algorithm(f"{name}@{low}_{high}")
    assert parse_algorithm(choice.label) == choice
    assert choice.label.startswith(name) and " " not in choice.label


@pytest.mark.parametrize(
    "spec, message",
    [
        ("ppo", "unknown algorithm 'ppo'; allowed: rec_reinforce, rec_oneside_is"),
        ("ppo", "aliases: reinforce = rec_reinforce"),
        ("reinforce@0.6_2.0", "'rec_reinforce' has no clipping range"),
        ("opmd@0.6_2", "@EPS_LOW_EPS_HIGH applies to rec_oneside_is"),
        ("rec_oneside_nois@0.6", "write the clipping range as NAME@EPS_LOW_EPS_HIGH"),
        ("rec_oneside_nois@a_b", "must be two numbers"),
        ("rec_oneside_nois@1.5_2.0", "epsilon_low must be in [0, 1]"),
        ("rec_oneside_nois@0.2_-1", "epsilon_high must be >= 0"),
        ("rec_oneside_nois@0.2_inf", "epsilon_high must be >= 0, got inf"),
    ],
)
def test_bad_specs_are_rejected_with_the_reason(spec, message):
    with pytest.raises(ValueError) as error:
        parse_algorithm(spec)
    assert message in str(error.value)


def test_a_list_takes_commas_or_spaces_and_rejects_duplicates_and_emptiness():
    assert [c.label for c in parse_algorithms("rec_reinforce, rec_oneside_nois,")] == ["rec_reinforce", "rec_oneside_nois"]
    assert [c.label for c in parse_algorithms("grpo  red_drop")] == ["grpo", "red_drop"]
    with pytest.raises(ValueError, match="rec_oneside_nois given twice"):
        parse_algorithms("rec_oneside_nois,rec_oneside_nois@0.2_0.2")
    with pytest.raises(ValueError, match="no algorithm given"):
        parse_algorithms(" , ")

