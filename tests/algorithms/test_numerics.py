"""Property tests: every loss stays finite, with finite gradients, on the inputs that break naive code:
fully masked rows, groups of one, identical rewards, |log-ratio| up to 50, and inf/NaN on padding."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from tests.recipe_config import call_registered_loss, loss_config
from verl_ext.algorithms import step_metrics
from verl_ext.algorithms.registry import ESTIMATORS, POLICY_LOSSES

AGGREGATIONS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "token-sum"]


@st.composite
def loss_inputs(draw):
    rows = draw(st.integers(1, 6))
    length = draw(st.integers(1, 8))
    lengths = draw(st.lists(st.integers(0, length), min_size=rows, max_size=rows))
    if all(n == 0 for n in lengths):
        lengths[0] = draw(st.integers(1, length))  # verl never sends a micro-batch with no token at all
    response_mask = torch.tensor([[t < n for t in range(length)] for n in lengths])
    old_log_prob = -torch.tensor(draw(st.lists(st.floats(0, 30), min_size=rows * length, max_size=rows * length))).view(rows, length)
    log_ratio = torch.tensor(draw(st.lists(st.floats(-50, 50), min_size=rows * length, max_size=rows * length))).view(rows, length)
    log_prob = old_log_prob + log_ratio
    per_response = draw(
        st.one_of(
            st.just([0.0] * rows),  # identical rewards
            st.lists(st.floats(-5, 5), min_size=rows, max_size=rows),
        )
    )
    advantages = torch.tensor(per_response)[:, None].expand(rows, length).clone()
    behaviour_ratio = torch.exp(torch.tensor(draw(st.lists(st.floats(-20, 20), min_size=rows * length, max_size=rows * length))).view(rows, length))
    garbage = draw(st.sampled_from([float("inf"), float("-inf"), float("nan"), 1e30]))
    for tensor in (log_prob, old_log_prob, advantages, behaviour_ratio):
        tensor[~response_mask] = garbage  # padding may hold anything
    return log_prob, old_log_prob, advantages, response_mask, behaviour_ratio


@pytest.fixture(scope="module")
def configs():
    """One actor config per loss, built once (about 0.1 s each): the registered losses only read it."""
    return {}


@pytest.mark.parametrize("loss_mode", sorted(POLICY_LOSSES))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=loss_inputs(), agg_mode=st.sampled_from(AGGREGATIONS))
def test_loss_and_gradient_are_finite(configs, loss_mode, inputs, agg_mode):
    log_prob, old_log_prob, advantages, response_mask, behaviour_ratio = inputs
    log_prob = log_prob.clone().requires_grad_(True)
    if loss_mode not in configs:
        configs[loss_mode] = loss_config(loss_mode)
    config = configs[loss_mode]
    loss, metrics = call_registered_loss(loss_mode, log_prob, old_log_prob, advantages, response_mask, agg_mode,
                                         config=config, behaviour_ratio=behaviour_ratio)
    loss.backward()
    assert torch.isfinite(loss), loss
    assert torch.isfinite(log_prob.grad).all()
    assert (log_prob.grad[~response_mask] == 0).all()  # padding never gets a gradient
    assert all(np.isfinite(value) for value in metrics.values()), metrics


@st.composite
def groups(draw):
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=5))  # includes groups of one
    uids, rewards = [], []
    for group, size in enumerate(sizes):
        identical = draw(st.booleans())
        value = draw(st.floats(-1e3, 1e3))
        for _ in range(size):
            uids.append(f"prompt-{group}")
            rewards.append(value if identical else draw(st.floats(-1e3, 1e3)))
    return rewards, uids


@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
@settings(max_examples=40, deadline=None)
@given(data=groups())
def test_estimators_are_finite_and_centred(estimator, data):
    rewards, uids = data
    scores = torch.tensor(rewards, dtype=torch.float32)
    token_level_rewards = scores[:, None] * torch.tensor([[0.0, 0.0, 1.0]])
    batch = DataProto.from_dict(
        tensors={"token_level_rewards": token_level_rewards, "response_mask": torch.ones(len(rewards), 3)},
        non_tensors={"uid": np.array(uids, dtype=object)},
    )
    config = OmegaConf.create({"adv_estimator": estimator, "gamma": 1.0, "lam": 1.0, "red_drop_seed": 0})
    advantages = compute_advantage(batch, adv_estimator=estimator, config=config).batch["advantages"][:, 0]
    assert torch.isfinite(advantages).all()
    for uid in set(uids):
        members = [i for i, u in enumerate(uids) if u == uid]
        group_advantages = advantages[members]
        group_rewards = scores[members]
        if len(members) == 1 or torch.all(group_rewards == group_rewards[0]):
            assert torch.all(group_advantages.abs() <= 1e-3 * (1 + group_rewards.abs().max()))
        # centred on the kept set (all of it for rec): sum of advantages is ~0
        assert abs(group_advantages.sum().item()) <= 1e-3 * (1 + group_rewards.abs().sum().item())
    if estimator == "red_drop":
        # each group drops exactly its excess of negatives over positives (signs before re-centring)
        expected_dropped = 0
        for uid in set(uids):
            centred = scores[[i for i, u in enumerate(uids) if u == uid]]
            centred = centred - centred.mean()
            expected_dropped += max(0, int((centred < -1e-6).sum()) - int((centred > 1e-6).sum()))
        dropped_fraction = step_metrics.pop_all()["red_drop/dropped_fraction"]
        assert dropped_fraction * len(uids) == pytest.approx(expected_dropped)
