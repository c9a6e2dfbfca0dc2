"""Extreme log-ratios: a response token whose log pi - log mu reaches 89 overflowed exp() to inf in float32, and a
loss whose mask removed that token multiplied inf by 0: M2PO returned a NaN loss and gradient (issue 31, item 9),
and so did every loss that exponentiates the log-ratio under a mask (REC-*-IS, REC-GSPO-IS, off-policy GRPO).
verl's losses clamp the log-ratio to [-20, 20] before exponentiating it; verl-ext's do the same
(``verl_ext.algorithms.tokens.importance_ratio``). Within the bound nothing changes: the oracle tests
(``tests/algorithms/test_loss_gradients.py``, ``test_topr_m2po.py``) compare every loss with its paper's formula.

Each loss runs through verl's registry with the actor config verl builds from the recipe, in float32 as verl's
actor computes log-probs.
"""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.recipe_config import call_registered_loss, loss_config
from verl_ext.algorithms.registry import POLICY_LOSSES

CONFIGS = {}


def run(loss_mode, log_prob, old_log_prob, advantages, response_mask, agg_mode="token-mean"):
    log_prob = log_prob.clone().requires_grad_(True)
    if loss_mode not in CONFIGS:
        CONFIGS[loss_mode] = loss_config(loss_mode)
    behaviour_ratio = torch.ones_like(old_log_prob)  # r' = pi_k / alpha = 1: pi_k is the behaviour policy
    loss, metrics = call_registered_loss(loss_mode, log_prob, old_log_prob, advantages, response_mask, agg_mode,
                                         config=CONFIGS[loss_mode], behaviour_ratio=behaviour_ratio)
    loss.backward()
    return loss, log_prob.grad, metrics


def assert_finite(loss, grad, metrics):
    assert torch.isfinite(loss), loss
    assert torch.isfinite(grad).all(), grad
    assert all(np.isfinite(value) for value in metrics.values()), metrics


def test_m2po_with_a_masked_token_at_log_ratio_89_has_a_finite_loss_and_gradient():
    """The reported case: the token moved with its advantage (A > 0, rho > 1) by 89 nats, M2PO masks it."""
    old_log_prob = torch.tensor([[-90.0, -1.0, -1.0], [-1.0, -1.0, -1.0]])
    log_prob = old_log_prob + torch.tensor([[89.0, 0.01, 0.02], [-0.01, 0.0, 0.01]])
    advantages = torch.tensor([[1.0] * 3, [-1.0] * 3])
    loss, grad, metrics = run("m2po", log_prob, old_log_prob, advantages, torch.ones(2, 3, dtype=torch.bool))
    assert_finite(loss, grad, metrics)
    assert metrics["actor/m2po_masked_fraction"] > 0  # the 89-nat token is the one masked
    assert grad[0, 0] == 0 and (grad[0, 1:] != 0).all()


@st.composite
def extreme_inputs(draw):
    rows = draw(st.integers(1, 4))
    length = draw(st.integers(1, 6))
    lengths = draw(st.lists(st.integers(1, length), min_size=rows, max_size=rows))
    response_mask = torch.tensor([[t < n for t in range(length)] for n in lengths])
    log_ratio = draw(st.lists(st.one_of(st.floats(-300, 300), st.sampled_from([-150.0, -89.0, 89.0, 150.0])),
                              min_size=rows * length, max_size=rows * length))
    old_log_prob = -torch.tensor(draw(st.lists(st.floats(0, 400), min_size=rows * length, max_size=rows * length)))
    old_log_prob = old_log_prob.view(rows, length)
    log_prob = old_log_prob + torch.tensor(log_ratio).view(rows, length)
    rewards = draw(st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=rows, max_size=rows))
    advantages = torch.tensor(rewards)[:, None].expand(rows, length).clone()
    return log_prob, old_log_prob, advantages, response_mask


@pytest.mark.parametrize("loss_mode", sorted(POLICY_LOSSES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=extreme_inputs(), agg_mode=st.sampled_from(["token-mean", "seq-mean-token-mean"]))
@example(inputs=(torch.tensor([[89.0, -1.0]]) - 1.0, torch.tensor([[-1.0, -1.0]]), torch.tensor([[1.0, 1.0]]),
                 torch.tensor([[True, True]])), agg_mode="token-mean")
@example(inputs=(torch.tensor([[-1.0, 150.0]]), torch.tensor([[-1.0, -1.0]]), torch.tensor([[0.0, 0.0]]),
                 torch.tensor([[True, True]])), agg_mode="token-mean")
def test_every_loss_stays_finite_with_log_ratios_far_beyond_float32s_exp(loss_mode, inputs, agg_mode):
    assert_finite(*run(loss_mode, *inputs, agg_mode=agg_mode))
