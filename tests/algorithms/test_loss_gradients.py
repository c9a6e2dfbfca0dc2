"""Each registered loss's gradient w.r.t. log_prob equals the paper's per-token gradient.

The expected gradients are written out here from the formulas of docs/algorithms.md (not computed by
verl-ext code), for verl's token-mean and for a sequence mode. Losses are called through verl's own
registry with the actor config verl builds from the recipe.
"""

import math

import pytest
import torch
from tests.recipe_config import call_registered_loss, loss_config

EPS_LOW, EPS_HIGH = 0.2, 0.5
OUTER_LOW, OUTER_HIGH = 0.6, 1.2
BETA = 0.1
TEMPERATURE = 0.7
HYPER = (
    f"actor_rollout_ref.actor.clip_ratio_low={EPS_LOW}",
    f"actor_rollout_ref.actor.clip_ratio_high={EPS_HIGH}",
    f"actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low={OUTER_LOW}",
    f"actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high={OUTER_HIGH}",
    f"actor_rollout_ref.actor.policy_loss.reg_coef={BETA}",
    f"actor_rollout_ref.actor.policy_loss.weight_temperature={TEMPERATURE}",
)


def hyperparameters_of(loss_mode: str) -> tuple[str, ...]:
    """HYPER without the keys the loss does not read (verl-ext refuses those at a non-default value)."""
    from verl_ext.algorithms.registry import POLICY_LOSSES

    return tuple(item for item in HYPER
                 if ".policy_loss." not in item or item.split("=", 1)[0] in POLICY_LOSSES[loss_mode].keys)


def make_batch(seed: int = 0, batch: int = 8, length: int = 16):
    generator = torch.Generator().manual_seed(seed)
    lengths = [length, 3, 5, 1, length, 12, 2, 14][:batch]
    response_mask = torch.zeros(batch, length)
    for row, n in enumerate(lengths):
        response_mask[row, :n] = 1
    old_log_prob = -torch.rand(batch, length, generator=generator) * 3 - 0.05
    # ratios spread well inside and outside every band: exp(+-1.2)
    log_prob = old_log_prob + (torch.rand(batch, length, generator=generator) * 2.4 - 1.2)
    per_response = torch.tensor([0.7, -0.4, 0.0, 1.3, -1.1, 0.25, -0.6, 0.9][:batch])
    advantages = per_response[:, None] * response_mask
    behaviour_ratio = torch.exp(torch.rand(batch, length, generator=generator) * 1.0 - 0.5) * response_mask
    return log_prob, old_log_prob, advantages, response_mask, behaviour_ratio


def loss_and_gradient(loss_mode: str, agg_mode: str, batch):
    log_prob, old_log_prob, advantages, response_mask, behaviour_ratio = batch
    log_prob = log_prob.clone().requires_grad_(True)
    loss, metrics = call_registered_loss(
        loss_mode, log_prob, old_log_prob, advantages, response_mask.bool(), agg_mode, loss_config(loss_mode, *hyperparameters_of(loss_mode)), behaviour_ratio
    )
    loss.backward()
    return loss, log_prob.grad, metrics


def per_token_direction(loss_mode, i, t, batch):
    """c_it with g = sum_t grad log pi_t * c_it, for the losses whose gradient decomposes per token."""
    log_prob, old_log_prob, advantages, response_mask, behaviour_ratio = batch
    a = advantages[i, t].item()
    rho = math.exp(log_prob[i, t].item() - old_log_prob[i, t].item())
    one_side = (a > 0 and rho <= 1 + EPS_HIGH) or (a < 0 and rho >= 1 - EPS_LOW)
    two_side = 1 - EPS_LOW <= rho <= 1 + EPS_HIGH
    ring = two_side or (a > 0 and rho <= 1 - OUTER_LOW) or (a < 0 and rho >= 1 + OUTER_HIGH)
    if loss_mode == "rec_reinforce":
        return a
    if loss_mode == "rec_oneside_is":
        return a * rho * one_side
    if loss_mode == "rec_oneside_nois":
        return a * one_side
    if loss_mode == "rec_twoside_is":
        return a * rho * two_side
    if loss_mode == "rec_twoside_nois":
        return a * two_side
    if loss_mode == "rec_ring_is":
        return a * rho * ring
    if loss_mode == "rec_ring_nois":
        return a * ring
    if loss_mode == "asymre":
        return a + BETA
    if loss_mode == "red_weight":
        return math.exp(a / TEMPERATURE) * a
    if loss_mode == "offpolicy_grpo":
        r_prime = behaviour_ratio[i, t].item()
        r = rho * r_prime
        lower, upper = max(r_prime - EPS_LOW, 0.0), r_prime + EPS_HIGH
        unclipped_active = (a > 0 and r <= upper) or (a < 0 and r >= lower)
        return a * r * unclipped_active
    raise AssertionError(loss_mode)


def sequence_direction(loss_mode, i, batch):
    """For the sequence-level losses: the direction shared by every token of response i."""
    log_prob, old_log_prob, advantages, response_mask, _ = batch
    tokens = [t for t in range(response_mask.shape[1]) if response_mask[i, t]]
    a = advantages[i, tokens[0]].item()
    deltas = [log_prob[i, t].item() - old_log_prob[i, t].item() for t in tokens]
    if loss_mode == "opmd":
        return a - BETA * sum(deltas)  # -grad of [-A log pi(y) + beta/2 (log pi(y) - log pi_old(y))^2]
    s = math.exp(sum(deltas) / len(deltas))
    sequence_mask = (a > 0 and s <= 1 + EPS_HIGH) or (a < 0 and s >= 1 - EPS_LOW)
    if loss_mode == "rec_gspo_is":
        return a * s * sequence_mask  # per token; the 1/|y_i| comes from the aggregation
    if loss_mode == "rec_gspo_nois":
        return a * sequence_mask
    raise AssertionError(loss_mode)


TOKEN_LOSSES = [
    "rec_reinforce",
    "rec_oneside_is",
    "rec_oneside_nois",
    "rec_twoside_is",
    "rec_twoside_nois",
    "rec_ring_is",
    "rec_ring_nois",
    "asymre",
    "red_weight",
    "offpolicy_grpo",
]
SEQUENCE_LOSSES = ["opmd", "rec_gspo_is", "rec_gspo_nois"]


def expected_gradient(loss_mode, agg_mode, batch):
    _, _, _, response_mask, _ = batch
    rows, length = response_mask.shape
    total_tokens = response_mask.sum().item()
    nonempty = sum(1 for i in range(rows) if response_mask[i].sum() > 0)
    expected = torch.zeros(rows, length)
    for i in range(rows):
        n_i = response_mask[i].sum().item()
        for t in range(length):
            if not response_mask[i, t]:
                continue
            if loss_mode in TOKEN_LOSSES:
                c = per_token_direction(loss_mode, i, t, batch)
            else:
                c = sequence_direction(loss_mode, i, batch)
            if agg_mode == "token-mean":
                expected[i, t] = -c / total_tokens
            elif agg_mode == "seq-mean-token-mean":
                expected[i, t] = -c / (nonempty * n_i)
            elif agg_mode == "token-sum":
                expected[i, t] = -c
            else:
                raise AssertionError(agg_mode)
    return expected


# Ratio regions that tell the masks apart: (sign of A, lower bound of rho, upper bound of rho).
REGIONS = [
    (1, 0.0, 1 - OUTER_LOW),
    (1, 1 - OUTER_LOW, 1 - EPS_LOW),
    (1, 1 - EPS_LOW, 1 + EPS_HIGH),
    (1, 1 + EPS_HIGH, math.inf),
    (-1, 0.0, 1 - EPS_LOW),
    (-1, 1 - EPS_LOW, 1 + EPS_HIGH),
    (-1, 1 + EPS_HIGH, 1 + OUTER_HIGH),
    (-1, 1 + OUTER_HIGH, math.inf),
]


@pytest.mark.parametrize("seed", [3, 5, 6, 8])
def test_batches_cover_every_mask_region(seed):
    """Guards the tests below: each of their batches has tokens in every region where the masks differ."""
    log_prob, old_log_prob, advantages, response_mask, _ = make_batch(seed)
    rho = torch.exp(log_prob - old_log_prob)
    for sign, low, high in REGIONS:
        in_region = (torch.sign(advantages) == sign) & (rho > low) & (rho < high) & response_mask.bool()
        assert in_region.any(), (sign, low, high)


@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("loss_mode", TOKEN_LOSSES + ["opmd", "rec_gspo_nois"])
def test_gradient_matches_paper(loss_mode, agg_mode):
    batch = make_batch(seed=3)
    _, gradient, _ = loss_and_gradient(loss_mode, agg_mode, batch)
    torch.testing.assert_close(gradient, expected_gradient(loss_mode, agg_mode, batch), rtol=1e-5, atol=1e-7)


def test_rec_gspo_is_gradient_in_its_sequence_mode():
    """B.7: g = (1/|y_i|) sum_t grad log pi_t * A_i s_i M_i, the mean over responses of token means."""
    batch = make_batch(seed=5)
    _, gradient, _ = loss_and_gradient("rec_gspo_is", "seq-mean-token-mean", batch)
    torch.testing.assert_close(gradient, expected_gradient("rec_gspo_is", "seq-mean-token-mean", batch), rtol=1e-5, atol=1e-7)


def test_rec_gspo_is_with_token_mean_keeps_each_token_weight():
    """Under token-mean the IS loss -A s M per token has gradient -A s M / N per token (documented)."""
    batch = make_batch(seed=6)
    _, gradient, _ = loss_and_gradient("rec_gspo_is", "token-mean", batch)
    torch.testing.assert_close(gradient, expected_gradient("rec_gspo_is", "token-mean", batch), rtol=1e-5, atol=1e-7)


def test_opmd_square_is_of_the_whole_sequence():
    """The regularizer is (beta/2)(sum_t Delta_t)^2, not sum_t (beta/2) Delta_t^2: check its value too."""
    log_prob, old_log_prob, _, response_mask, behaviour_ratio = make_batch(seed=7)
    zero_advantages = torch.zeros_like(log_prob)
    batch = (log_prob, old_log_prob, zero_advantages, response_mask, behaviour_ratio)
    loss, _, metrics = loss_and_gradient("opmd", "token-sum", batch)
    delta = (log_prob - old_log_prob) * response_mask
    expected = sum(0.5 * BETA * delta[i].sum().item() ** 2 for i in range(len(delta)))
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    per_token_squares = sum(0.5 * BETA * (delta[i] ** 2).sum().item() for i in range(len(delta)))
    assert loss.item() != pytest.approx(per_token_squares, rel=1e-3)
    assert metrics["actor/regularizer"] == pytest.approx(expected / len(delta), rel=1e-5)


def test_one_side_metrics_split_by_advantage_sign():
    batch = make_batch(seed=8)
    log_prob, old_log_prob, advantages, response_mask, _ = batch
    _, _, metrics = loss_and_gradient("rec_oneside_nois", "token-mean", batch)
    rho = torch.exp(log_prob - old_log_prob)
    masked_positive = ((advantages > 0) & (rho > 1 + EPS_HIGH) & response_mask.bool()).sum().item()
    masked_negative = ((advantages < 0) & (rho < 1 - EPS_LOW) & response_mask.bool()).sum().item()
    tokens = response_mask.sum().item()
    assert masked_positive > 0 and masked_negative > 0  # the batch exercises both sides
    assert metrics["actor/pg_clipfrac_positive"] == pytest.approx(masked_positive / tokens)
    assert metrics["actor/pg_clipfrac_negative"] == pytest.approx(masked_negative / tokens)
    assert metrics["actor/pg_clipfrac"] == pytest.approx((masked_positive + masked_negative) / tokens)
    assert metrics["actor/ppo_kl"] == pytest.approx((-(log_prob - old_log_prob) * response_mask).sum().item() / tokens, rel=1e-5)
    assert metrics["actor/ratio_max"] == pytest.approx(rho[response_mask.bool()].max().item(), rel=1e-5)
    assert metrics["actor/ratio_mean"] == pytest.approx(rho[response_mask.bool()].mean().item(), rel=1e-5)


def test_red_weight_reports_weights():
    batch = make_batch(seed=9)
    _, _, metrics = loss_and_gradient("red_weight", "token-mean", batch)
    per_response = torch.tensor([0.7, -0.4, 0.0, 1.3, -1.1, 0.25, -0.6, 0.9])
    weights = torch.exp(per_response / TEMPERATURE)
    assert metrics["actor/red_weight_mean"] == pytest.approx(weights.mean().item(), rel=1e-5)
    assert metrics["actor/red_weight_max"] == pytest.approx(weights.max().item(), rel=1e-5)


def test_asymre_reports_its_regularizer():
    batch = make_batch(seed=10)
    log_prob, _, _, response_mask, _ = batch
    _, _, metrics = loss_and_gradient("asymre", "token-mean", batch)
    sequence_log_prob = (log_prob * response_mask).sum(-1)
    assert metrics["actor/regularizer"] == pytest.approx((-BETA * sequence_log_prob).mean().item(), rel=1e-5)
