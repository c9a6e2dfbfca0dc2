"""The paper's 3-arm bandit (arXiv 2509.24203, Section 3), through the registered losses.

Behaviour data from pi_b = [0.3, 0.6, 0.1] with rewards r = [0, 0.8, 1]: the group mean is 0.58, so
REINFORCE's expected update pi_b(a)(r(a) - 0.58) favours the sub-optimal arm 2 (0.132 > 0.042) and,
trained on this stale data, drives a softmax policy there. A clipped loss stops pushing an arm once its
ratio pi / pi_b leaves the band, so the policy stays near the behaviour policy.
"""

import pytest
import torch
from tests.recipe_config import call_registered_loss, loss_config

BEHAVIOUR = torch.tensor([0.3, 0.6, 0.1])
REWARDS = torch.tensor([0.0, 0.8, 1.0])
ACTIONS = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1, 1, 2])  # K = 10 responses drawn in pi_b's proportions
EPSILON = 0.2


def train(loss_mode, steps=1200, learning_rate=0.5):
    config = loss_config(loss_mode, f"actor_rollout_ref.actor.clip_ratio_low={EPSILON}", f"actor_rollout_ref.actor.clip_ratio_high={EPSILON}")
    theta = torch.zeros(3, requires_grad=True)
    with torch.no_grad():
        theta.copy_(BEHAVIOUR.log())  # start at the behaviour policy
    rewards = REWARDS[ACTIONS]
    advantages = (rewards - rewards.mean())[:, None]  # the "rec" estimator, one token per response
    old_log_prob = BEHAVIOUR.log()[ACTIONS][:, None]
    response_mask = torch.ones(len(ACTIONS), 1, dtype=torch.bool)
    optimizer = torch.optim.SGD([theta], lr=learning_rate)
    for _ in range(steps):
        log_prob = torch.log_softmax(theta, dim=0)[ACTIONS][:, None]
        loss, _ = call_registered_loss(loss_mode, log_prob, old_log_prob, advantages, response_mask, config=config)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return torch.softmax(theta.detach(), dim=0)


def test_reinforce_converges_to_the_sub_optimal_arm():
    policy = train("rec_reinforce")
    assert policy.argmax().item() == 1
    assert policy[1] > 0.95


@pytest.mark.parametrize("loss_mode", ["rec_oneside_is", "rec_oneside_nois", "rec_twoside_is", "rec_ring_nois"])
def test_clipped_losses_keep_the_ratios_of_favoured_arms_within_the_band(loss_mode):
    policy = train(loss_mode)
    ratio = policy / BEHAVIOUR
    # arms 2 and 3 have A > 0: their gradient stops once pi/pi_b > 1 + epsilon (a small step may overshoot)
    assert ratio[1] <= 1 + EPSILON + 0.02, ratio
    assert ratio[2] <= 1 + EPSILON + 0.02, ratio
    assert policy[1] < 0.75  # far from REINFORCE's collapse onto arm 2
