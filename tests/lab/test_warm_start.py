"""The lab's initial policy: a few supervised steps on the counting task, stopped at a sampled reward."""

import json

import pytest

from verl_ext.lab.warm_start import WarmStartRecipe, build_warm_start_assets, initial_policy_assets, sampled_reward


@pytest.fixture(scope="module")
def warm(lab_assets):
    return initial_policy_assets(lab_assets, "warm")


def test_the_warm_start_scores_between_random_and_the_target(warm, lab_assets):
    manifest = json.loads((warm / "manifest.json").read_text())
    recipe = WarmStartRecipe()
    assert manifest["sampled_reward_before"] < 0.15  # the random tiny model
    assert recipe.stop_at_reward <= manifest["sampled_reward_after"] < 0.9
    assert 0 < manifest["supervised_steps"] <= recipe.max_steps
    # the data is the tiny assets' own, byte for byte; the model differs
    assert (warm / "data" / "train.parquet").read_bytes() == (lab_assets / "data" / "train.parquet").read_bytes()
    assert (warm / "model" / "model.safetensors").read_bytes() != (lab_assets / "model" / "model.safetensors").read_bytes()


def test_the_saved_model_scores_what_the_manifest_says_on_fresh_samples(warm):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(warm / "model", dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(warm / "model")
    reward = sampled_reward(model, tokenizer, WarmStartRecipe(), seed=12345)
    recorded = json.loads((warm / "manifest.json").read_text())["sampled_reward_after"]
    assert abs(reward - recorded) < 0.12  # 160 samples at temperature 1: a different draw, the same policy


def test_a_current_build_is_reused_and_a_changed_recipe_rebuilds(warm, lab_assets):
    before = (warm / "manifest.json").stat().st_mtime_ns
    assert initial_policy_assets(lab_assets, "warm") == warm
    assert (warm / "manifest.json").stat().st_mtime_ns == before
    assert initial_policy_assets(lab_assets, "random") == lab_assets.resolve()
    with pytest.raises(ValueError, match="allowed: warm, random"):
        initial_policy_assets(lab_assets, "sft")


def test_an_unreachable_stop_value_fails_loudly(lab_assets, tmp_path):
    with pytest.raises(RuntimeError, match="warm start: sampled reward .* after 2 supervised steps"):
        build_warm_start_assets(lab_assets, tmp_path / "w", WarmStartRecipe(stop_at_reward=0.99, max_steps=2, check_every=1, samples_per_count=4))
    assert not (tmp_path / "w").exists()
