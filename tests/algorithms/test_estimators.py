"""The estimators driven through verl's ``compute_advantage`` with a ``DataProto`` and group uids."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from verl_ext.algorithms import step_metrics
from verl_ext.algorithms.red_drop import _red_drop_generators


def batch(rewards, uids, length=4):
    rewards = torch.tensor(rewards, dtype=torch.float32)
    response_mask = torch.ones(len(rewards), length)
    response_mask[0, 2:] = 0  # rows of different lengths
    token_level_rewards = torch.zeros(len(rewards), length)
    last = response_mask.sum(-1).long() - 1
    token_level_rewards[torch.arange(len(rewards)), last] = rewards  # verl puts the reward on the last token
    return DataProto.from_dict(
        tensors={"token_level_rewards": token_level_rewards, "response_mask": response_mask},
        non_tensors={"uid": np.array(uids, dtype=object)},
    )


def advantages_of(data, estimator, **config):
    algorithm = OmegaConf.create({"adv_estimator": estimator, "gamma": 1.0, "lam": 1.0, **config})
    out = compute_advantage(data, adv_estimator=estimator, config=algorithm)
    advantages = out.batch["advantages"]
    mask = out.batch["response_mask"]
    assert torch.all(advantages[mask == 0] == 0)  # nothing on padding
    per_response = advantages[:, 0]
    assert torch.allclose(advantages, per_response[:, None] * mask)  # constant over each response
    return per_response


def test_rec_is_reward_minus_group_mean_without_std():
    rewards = [1.0, 0.0, 0.0, 0.5, 0.2, 0.2, 0.9]
    uids = ["a", "a", "a", "b", "b", "c", "c"]
    per_response = advantages_of(batch(rewards, uids), "rec")
    mean_a, mean_b, mean_c = 1 / 3, 0.35, 0.55
    expected = [1 - mean_a, -mean_a, -mean_a, 0.5 - mean_b, 0.2 - mean_b, 0.2 - mean_c, 0.9 - mean_c]
    torch.testing.assert_close(per_response, torch.tensor(expected))


def test_rec_group_of_one_and_identical_rewards_give_zero():
    per_response = advantages_of(batch([0.7, 0.3, 0.3, 0.3], ["solo", "same", "same", "same"]), "rec")
    torch.testing.assert_close(per_response, torch.zeros(4))


def test_rec_without_uids_is_a_clear_error():
    data = batch([1.0, 0.0], ["a", "a"])
    data.non_tensor_batch.pop("uid")
    with pytest.raises(ValueError, match="group ids"):
        advantages_of(data, "rec")


def red_drop(rewards, uids, seed):
    _red_drop_generators.clear()
    step_metrics.pop_all()
    per_response = advantages_of(batch(rewards, uids), "red_drop", red_drop_seed=seed)
    return per_response, step_metrics.pop_all()


def test_red_drop_balances_each_group_and_recentres_on_the_kept_set():
    # group a: 1 positive, 4 negatives -> 3 negatives dropped; group b: 2 positives, 1 negative -> none dropped
    rewards = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    uids = ["a"] * 5 + ["b"] * 3
    per_response, metrics = red_drop(rewards, uids, seed=3)
    group_a = per_response[:5]
    kept_negatives = [i for i in range(1, 5) if group_a[i] != 0]
    assert len(kept_negatives) == 1  # balanced: one positive, one negative
    # S = {positive, one negative}: mean 0.5, so A = +0.5 and -0.5
    assert group_a[0].item() == pytest.approx(0.5)
    assert group_a[kept_negatives[0]].item() == pytest.approx(-0.5)
    # group b keeps everyone: A = r - 2/3
    torch.testing.assert_close(per_response[5:], torch.tensor([1 / 3, 1 / 3, -2 / 3]))
    assert metrics["red_drop/dropped_fraction"] == pytest.approx(3 / 8)


def test_red_drop_is_reproducible_from_its_seed_and_uniform_over_negatives():
    rewards = [1.0, 0.0, 0.0, 0.0, 0.0]
    uids = ["a"] * 5
    first, _ = red_drop(rewards, uids, seed=11)
    again, _ = red_drop(rewards, uids, seed=11)
    torch.testing.assert_close(first, again)

    _red_drop_generators.clear()
    kept_counts = torch.zeros(5)
    draws = 400
    for _ in range(draws):  # one generator, advanced draw after draw, as over a run's steps
        kept_counts += advantages_of(batch(rewards, uids), "red_drop", red_drop_seed=5) != 0
    assert kept_counts[0] == draws  # the positive is always kept
    # each negative is kept with probability 1/4
    assert torch.all((kept_counts[1:] / draws - 0.25).abs() < 0.08), kept_counts


def test_red_drop_keeps_groups_without_excess_negatives():
    per_response, metrics = red_drop([1.0, 1.0, 0.0, 0.4, 0.4], ["a", "a", "a", "b", "b"], seed=0)
    torch.testing.assert_close(per_response, torch.tensor([1 / 3, 1 / 3, -2 / 3, 0.0, 0.0]))
    assert metrics["red_drop/dropped_fraction"] == 0.0


def test_red_drop_fraction_ignores_verls_padding_rows():
    """verl pads a batch with zero-loss rows in a group of their own (uid 'pad<hex>'): not responses."""
    rewards = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    uids = ["a", "a", "a", "a", "padc0ffee", "padc0ffee"]
    per_response, metrics = red_drop(rewards, uids, seed=2)
    assert metrics["red_drop/dropped_fraction"] == pytest.approx(2 / 4)  # 2 of group a's 3 negatives
    torch.testing.assert_close(per_response[4:], torch.zeros(2))
