"""The one run value and the one grid model: a preset's layers in order, names, labels and descriptions, and a
grid's points x learning rates x seeds with its learning-rate factors and unique names."""

import pytest

from verl_ext.algorithms.presets import parse_algorithm
from verl_ext.runs.grid import Grid, Point, points
from verl_ext.runs.names import run_name
from verl_ext.overrides import override_key
from verl_ext.runs.run import LEARNING_RATE_KEY, SEED_KEYS, ZERO_VARIANCE_MASKING, Run, preset_overrides
from verl_ext.staleness.setting import ON_POLICY, parse_setting


def values(overrides):
    return {override_key(item): item.split("=", 1)[1] for item in overrides}


def test_a_preset_run_has_the_layers_in_order_and_the_callers_overrides_win():
    ring = parse_algorithm("rec_ring_nois@0.3_0.5")
    mixed = parse_setting("mixed")
    run = Run.from_preset(
        "x", ring, mixed, base=("data.train_batch_size=16", "actor_rollout_ref.actor.clip_ratio_low=0.9"),
        learning_rate=0.02, seed=7, zero_variance_masking=True,
        overrides=("actor_rollout_ref.actor.optim.lr=0.5", "a.b=1"),
    )
    got = values(run.overrides)
    assert got["data.train_batch_size"] == "16"  # the base stays where no later layer sets the key
    assert got["actor_rollout_ref.actor.clip_ratio_low"] == "0.3"  # the preset wins over the base
    assert got["trainer.v1.delayed_sync.sync_interval"] == "16" and got["trainer.v1.delayed_sync.sync_offset"] == "8"
    assert got[LEARNING_RATE_KEY] == "0.5"  # the caller's overrides win over the run's learning rate
    assert all(got[key] == "7" for key in SEED_KEYS)
    assert ZERO_VARIANCE_MASKING in run.overrides
    assert run.overrides[-1] == "a.b=1"
    keys = [override_key(item) for item in run.overrides]
    assert len(keys) == len(set(keys))  # merged: one entry per key
    position = {item: index for index, item in enumerate(run.overrides)}
    layers = [item for item in preset_overrides(ring, mixed) if item in position]
    assert [position[item] for item in layers] == sorted(position[item] for item in layers)
    assert (run.algorithm, run.setting, run.learning_rate, run.seed) == (ring, mixed, 0.02, 7)


def test_a_run_without_setting_learning_rate_or_seed_sets_none_of_their_keys():
    run = Run.from_preset("quick", parse_algorithm("opmd"))
    keys = {override_key(item) for item in run.overrides}
    assert not keys & {LEARNING_RATE_KEY, *SEED_KEYS, "trainer.v1.trainer_mode", "trainer.v1.delayed_sync.sync_interval"}
    assert values(run.overrides)["algorithm.adv_estimator"] == "rec"
    assert values(run.overrides)["actor_rollout_ref.actor.policy_loss.reg_coef"] == "0.1"


def test_the_label_and_description_are_the_name_without_the_setting():
    enlarged = parse_algorithm("rec_oneside_nois@0.6_2")
    setting = parse_setting("sync_interval_20")
    run = Run.from_preset(run_name(enlarged, setting, 2e-6), enlarged, setting, learning_rate=2e-6, profile="gsm8k-qwen2.5-1.5b")
    assert run.name == "rec_oneside_nois@0.6_2-lr2e-06-sync_interval_20"
    assert run.label == "rec_oneside_nois@0.6_2-lr2e-06"
    description = run.description(cpu_smoke=True)
    assert (description.run, description.group, description.setting) == (run.label, "sync_interval_20", "sync_interval_20")
    assert (description.algorithm, description.learning_rate, description.profile, description.cpu_smoke) == (
        "rec_oneside_nois@0.6_2", "2e-06", "gsm8k-qwen2.5-1.5b", True)
    masked = Run.from_preset("m", parse_algorithm("offpolicy_grpo"), ON_POLICY, zero_variance_masking=True)
    assert masked.label == "offpolicy_grpo-zvm"
    assert Run("plain").label == "plain" and Run("plain").description().group == ""
    assert run_name(enlarged) == "rec_oneside_nois@0.6_2"  # a run in verl's own mode: no setting part


@pytest.mark.parametrize("fields, error", [
    ({"name": "has space"}, "run name"),
    ({"name": "x", "project": "."}, "project"),
    ({"name": "x", "steps": 0}, "steps"),
    ({"name": "x", "steps": True}, "steps"),
    ({"name": "x", "learning_rate": -1.0}, "learning rate"),
    ({"name": "x", "overrides": "a=1"}, "sequence"),
])
def test_a_bad_run_is_refused_naming_the_field(fields, error):
    with pytest.raises((ValueError, TypeError), match=error):
        Run(**fields)


def test_pi_old_is_the_last_bypass_mode_or_the_recipes_default():
    assert Run("x").pi_old_is_behaviour
    assert not Run.from_preset("x", parse_algorithm("offpolicy_grpo")).pi_old_is_behaviour
    flipped = Run.from_preset("x", parse_algorithm("topr"), overrides=("algorithm.rollout_correction.bypass_mode=False",))
    assert not flipped.pi_old_is_behaviour


def test_a_grid_runs_points_times_learning_rates_times_seeds_seeds_innermost():
    grpo, nois = parse_algorithm("grpo"), parse_algorithm("rec_oneside_nois")
    settings = [parse_setting("sync_interval_20"), parse_setting("offline")]
    by_setting = points([grpo, nois], settings)
    assert [(p.algorithm.name, p.setting.label) for p in by_setting] == [
        ("grpo", "sync_interval_20"), ("rec_oneside_nois", "sync_interval_20"), ("grpo", "offline"), ("rec_oneside_nois", "offline")]
    by_algorithm = points([grpo, nois], settings, settings_outer=False)
    assert [(p.algorithm.name, p.setting.label) for p in by_algorithm] == [
        ("grpo", "sync_interval_20"), ("grpo", "offline"), ("rec_oneside_nois", "sync_interval_20"), ("rec_oneside_nois", "offline")]
    grid = Grid("g", by_algorithm[:1] + points([nois], settings[:1], learning_rate_factor=2.0), learning_rates=(1e-3, 5e-3),
                seeds=(0, 3))
    choices = [(point.algorithm.name, rate, seed) for point, rate, seed in grid.choices()]
    assert choices == [
        ("grpo", 1e-3, 0), ("grpo", 1e-3, 3), ("grpo", 5e-3, 0), ("grpo", 5e-3, 3),
        ("rec_oneside_nois", 2e-3, 0), ("rec_oneside_nois", 2e-3, 3), ("rec_oneside_nois", 1e-2, 0), ("rec_oneside_nois", 1e-2, 3)]
    profile_rate = Grid("h", by_algorithm)
    assert {(rate, seed) for _, rate, seed in profile_rate.choices()} == {(None, None)}


def test_a_grid_builds_its_runs_and_refuses_two_that_would_share_a_name():
    grid = Grid("g", points([parse_algorithm("grpo")], [ON_POLICY]), learning_rates=(1e-3,), seeds=(0, 1))
    runs = grid.runs(("base.key=1",), ("between.key=2",), project="proj", profile="prof")
    assert [run.name for run in runs] == ["grpo-lr0.001-on_policy-seed0", "grpo-lr0.001-on_policy-seed1"]
    assert runs[1] == Run.from_preset("grpo-lr0.001-on_policy-seed1", parse_algorithm("grpo"), ON_POLICY,
                                      base=("base.key=1",), learning_rate=1e-3, seed=1, overrides=("between.key=2",),
                                      project="proj", profile="prof")
    twice = Grid("g", points([parse_algorithm("grpo")] * 2, [ON_POLICY]))
    with pytest.raises(ValueError, match="grid g would run grpo-on_policy twice"):
        twice.runs()
    with pytest.raises(ValueError, match="g: EXPERIMENT_NAME='one' names 2 runs the same"):
        grid.runs(name="one", named_by="EXPERIMENT_NAME")
    assert [run.name for run in grid.runs(prefix="p")] == ["p-grpo-lr0.001-on_policy-seed0", "p-grpo-lr0.001-on_policy-seed1"]
    with pytest.raises(ValueError, match="empty"):
        Grid("empty", ())
    assert Point(parse_algorithm("grpo"), ON_POLICY).learning_rate_factor == 1.0
