"""TOPR and M2PO: each registered loss's gradient equals the one written here from the papers, in both forms.

The expected values are computed in plain Python from the formulas (TOPR, arXiv 2503.14286: positive examples
get REINFORCE, negative ones the ratio pi(y)/mu(y) truncated to [0, 1]; M2PO, arXiv 2510.01161: Algorithm 1
as written, a loop that masks the largest squared log-ratio until the mean of the rest is <= tau, then
J = token mean of M rho A), not with verl-ext's code. Losses are called through verl's registry with the actor
config verl builds from the recipe.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.algorithms.test_loss_gradients import loss_and_gradient, make_batch
from tests.recipe_config import call_registered_loss, loss_config
from verl_ext.algorithms.m2po import second_moment_mask

POLICY_LOSS = "actor_rollout_ref.actor.policy_loss"


def tokens_of(response_mask, i):
    return [t for t in range(response_mask.shape[1]) if response_mask[i, t]]


def normalised(directions, response_mask, agg_mode):
    """-c_it / (verl's normaliser): the gradient w.r.t. log pi_t of a loss whose per-token direction is c_it."""
    rows = response_mask.shape[0]
    total = response_mask.sum().item()
    nonempty = sum(1 for i in range(rows) if response_mask[i].sum() > 0)
    expected = torch.zeros_like(response_mask)
    for (i, t), c in directions.items():
        n_i = response_mask[i].sum().item()
        expected[i, t] = -c / total if agg_mode == "token-mean" else -c / (nonempty * n_i)
    return expected


def gradient(loss_mode, batch, *overrides, agg_mode="token-mean"):
    """The registered loss's gradient w.r.t. log pi and its metrics, with the recipe's config plus ``overrides``."""
    log_prob, old_log_prob, advantages, response_mask, _ = batch
    log_prob = log_prob.clone().requires_grad_(True)
    config = loss_config(loss_mode, *overrides)
    loss, metrics = call_registered_loss(loss_mode, log_prob, old_log_prob, advantages, response_mask.bool(), agg_mode, config)
    loss.backward()
    return log_prob.grad, metrics


# ---------------------------------------------------------------------------------------------------------
# TOPR
# ---------------------------------------------------------------------------------------------------------


def topr_weights(batch, ratio_level):
    """alpha_it: 1 for A >= 0; for A < 0 the truncated ratio, min(1, prod_t rho_it) or min(1, rho_it)."""
    log_prob, old_log_prob, advantages, response_mask, _ = batch
    weights = {}
    for i in range(response_mask.shape[0]):
        tokens = tokens_of(response_mask, i)
        sequence_ratio = math.prod(math.exp(log_prob[i, t].item() - old_log_prob[i, t].item()) for t in tokens)
        for t in tokens:
            a = advantages[i, t].item()
            rho = math.exp(log_prob[i, t].item() - old_log_prob[i, t].item())
            if a >= 0:
                weights[i, t] = 1.0
            else:
                weights[i, t] = min(1.0, sequence_ratio if ratio_level == "sequence" else rho)
    return weights


def topr_expected(batch, ratio_level, agg_mode):
    _, _, advantages, response_mask, _ = batch
    directions = {(i, t): w * advantages[i, t].item() for (i, t), w in topr_weights(batch, ratio_level).items()}
    return normalised(directions, response_mask, agg_mode)


@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("ratio_level", ["sequence", "token"])
def test_topr_gradient_matches_the_paper(ratio_level, agg_mode):
    batch = make_batch(seed=3)
    advantages = batch[2]
    negative = {w for (i, t), w in topr_weights(batch, ratio_level).items() if advantages[i, t] < 0}
    assert min(negative) < 1 and max(negative) == 1  # truncated and untruncated negative examples
    grad, _ = gradient("topr", batch, f"{POLICY_LOSS}.topr_ratio_level={ratio_level}", agg_mode=agg_mode)
    torch.testing.assert_close(grad, topr_expected(batch, ratio_level, agg_mode), rtol=1e-5, atol=1e-7)


def test_topr_default_is_the_papers_sequence_ratio_and_the_forms_differ():
    batch = make_batch(seed=3)
    default, _ = gradient("topr", batch)
    torch.testing.assert_close(default, topr_expected(batch, "sequence", "token-mean"), rtol=1e-5, atol=1e-7)
    token, _ = gradient("topr", batch, f"{POLICY_LOSS}.topr_ratio_level=token")
    assert not torch.allclose(default, token, rtol=1e-3, atol=1e-6)  # the batch tells the two forms apart
    # ... but not on a one-token response (row 3 of the batch has one token; its advantage is positive)
    response_mask = batch[3]
    one_token_rows = [i for i in range(len(response_mask)) if response_mask[i].sum() == 1]
    assert one_token_rows and all(torch.allclose(default[i], token[i]) for i in one_token_rows)


def test_topr_forms_agree_on_one_token_negative_responses():
    log_prob, old_log_prob, advantages, response_mask, ratio = make_batch(seed=4)
    response_mask = torch.zeros_like(response_mask)
    response_mask[:, 0] = 1
    advantages = -advantages.abs()[:, :1].expand_as(response_mask) * response_mask - 0.1 * response_mask
    batch = (log_prob, old_log_prob, advantages, response_mask, ratio)
    sequence, _ = gradient("topr", batch)
    token, _ = gradient("topr", batch, f"{POLICY_LOSS}.topr_ratio_level=token")
    torch.testing.assert_close(sequence, token)
    torch.testing.assert_close(sequence, topr_expected(batch, "token", "token-mean"), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("ratio_level", ["sequence", "token"])
def test_topr_reports_the_mean_truncation_weight_of_negative_examples(ratio_level):
    batch = make_batch(seed=4)
    advantages = batch[2]
    _, metrics = gradient("topr", batch, f"{POLICY_LOSS}.topr_ratio_level={ratio_level}")
    negative = [w for (i, t), w in topr_weights(batch, ratio_level).items() if advantages[i, t] < 0]
    assert negative and min(negative) < 1  # some weights are truncated in this batch
    assert metrics["actor/topr_negative_weight_mean"] == pytest.approx(sum(negative) / len(negative), rel=1e-5)


# ---------------------------------------------------------------------------------------------------------
# M2PO
# ---------------------------------------------------------------------------------------------------------


def algorithm_1(squared: dict, candidates: set, threshold: float) -> set:
    """The paper's Algorithm 1, line by line: returns the masked tokens (M_j = False)."""
    remaining = set(candidates)
    masked = set()
    while remaining and sum(squared[j] for j in remaining) / len(remaining) > threshold:
        j = max(remaining, key=lambda k: squared[k])
        masked.add(j)
        remaining.remove(j)
    return masked


def m2po_tokens(batch, token_set):
    """(squared log-ratio per token, the set T): trust-region tokens are those whose ratio moved with A's sign."""
    log_prob, old_log_prob, advantages, response_mask, _ = batch
    squared, candidates = {}, set()
    for i in range(response_mask.shape[0]):
        for t in tokens_of(response_mask, i):
            delta = log_prob[i, t].item() - old_log_prob[i, t].item()
            a = advantages[i, t].item()
            squared[i, t] = delta * delta
            if token_set == "all" or (a > 0 and delta > 0) or (a < 0 and delta < 0):
                candidates.add((i, t))
    return squared, candidates


def m2po_expected(batch, token_set, threshold, agg_mode="token-mean"):
    log_prob, old_log_prob, advantages, response_mask, _ = batch
    squared, candidates = m2po_tokens(batch, token_set)
    masked = algorithm_1(squared, candidates, threshold)
    directions = {
        (i, t): 0.0 if (i, t) in masked else advantages[i, t].item() * math.exp(log_prob[i, t].item() - old_log_prob[i, t].item())
        for (i, t) in squared
    }
    return normalised(directions, response_mask, agg_mode), masked, squared, candidates


@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("token_set", ["trust_region", "all"])
@pytest.mark.parametrize("threshold", [0.04, 0.2])
def test_m2po_gradient_matches_algorithm_1_and_the_objective(token_set, threshold, agg_mode):
    batch = make_batch(seed=3)
    grad, _ = gradient("m2po", batch, f"{POLICY_LOSS}.m2_tokens={token_set}", f"{POLICY_LOSS}.m2_threshold={threshold}", agg_mode=agg_mode)
    expected, masked, _, _ = m2po_expected(batch, token_set, threshold, agg_mode)
    assert masked  # the batch (log-ratios up to +-1.2) is far outside both bounds
    torch.testing.assert_close(grad, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("token_set", ["trust_region", "all"])
def test_m2po_kept_tokens_satisfy_the_second_moment_bound_with_as_few_masked_as_possible(token_set):
    batch = make_batch(seed=6)
    threshold = 0.04
    _, metrics = gradient("m2po", batch, f"{POLICY_LOSS}.m2_tokens={token_set}")  # the default tau, 0.04
    _, masked, squared, candidates = m2po_expected(batch, token_set, threshold)
    kept = candidates - masked
    assert kept and sum(squared[j] for j in kept) / len(kept) <= threshold
    # one token fewer masked (the smallest masked one put back) would break the bound: Algorithm 1 stopped at once
    back = min(masked, key=lambda j: squared[j])
    assert sum(squared[j] for j in kept | {back}) / (len(kept) + 1) > threshold
    before = sum(squared[j] for j in candidates) / len(candidates)
    assert metrics["actor/m2po_second_moment"] == pytest.approx(before, rel=1e-5) and before > threshold
    assert metrics["actor/m2po_second_moment_kept"] == pytest.approx(sum(squared[j] for j in kept) / len(kept), rel=1e-5)
    assert metrics["actor/m2po_second_moment_kept"] <= threshold
    assert metrics["actor/m2po_masked_fraction"] == pytest.approx(len(masked) / len(squared), rel=1e-5)


def test_m2po_default_masks_only_trust_region_tokens():
    """The paper's T: a token whose ratio moved against its advantage (A < 0, rho > 1) is never masked, however far."""
    batch = make_batch(seed=3)
    advantages = batch[2]
    squared, candidates = m2po_tokens(batch, "trust_region")
    outside = [j for j in squared if j not in candidates and advantages[j] != 0]
    assert max(squared[j] for j in outside) > 1.0  # far outside any trust region
    grad, _ = gradient("m2po", batch)
    expected, masked, _, _ = m2po_expected(batch, "trust_region", 0.04)
    torch.testing.assert_close(grad, expected, rtol=1e-5, atol=1e-7)
    assert all(grad[j] != 0 for j in outside) and not masked & set(outside)
    every, _ = gradient("m2po", batch, f"{POLICY_LOSS}.m2_tokens=all")
    assert any(every[j] == 0 for j in outside)  # AReaL's form measures and masks them too


def test_m2po_within_the_bound_is_importance_weighted_reinforce():
    batch = make_batch(seed=8)
    log_prob, old_log_prob, advantages, response_mask, _ = batch
    grad, metrics = gradient("m2po", batch, f"{POLICY_LOSS}.m2_threshold=100")
    rho = torch.exp(log_prob - old_log_prob) * response_mask
    torch.testing.assert_close(grad, -(advantages * rho) / response_mask.sum(), rtol=1e-5, atol=1e-7)
    assert metrics["actor/m2po_masked_fraction"] == 0 and metrics["actor/pg_clipfrac"] == 0


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(0, 4, allow_nan=False), min_size=1, max_size=30),
    in_set=st.lists(st.booleans(), min_size=30, max_size=30),
    threshold=st.floats(0, 1, allow_nan=False),
)
def test_the_one_sort_mask_is_algorithm_1(values, in_set, threshold):
    squared = torch.tensor(values, dtype=torch.float64)
    candidates = torch.tensor(in_set[: len(values)])
    keep = second_moment_mask(squared, candidates, threshold)
    masked = algorithm_1({j: values[j] for j in range(len(values))}, {j for j in range(len(values)) if in_set[j]}, threshold)
    got = {j for j in range(len(values)) if not keep[j]}
    # ties may mask another token of the same value: compare the masked values, not positions
    assert sorted(values[j] for j in got) == sorted(values[j] for j in masked)
    assert not any(not candidates[j] for j in got)


# ---------------------------------------------------------------------------------------------------------
# both: on-policy, each is REINFORCE with the same advantages
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "loss_mode, overrides",
    [
        ("topr", ()),
        ("topr", (f"{POLICY_LOSS}.topr_ratio_level=token",)),
        ("m2po", ()),
        ("m2po", (f"{POLICY_LOSS}.m2_tokens=all",)),
    ],
)
@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
def test_on_policy_each_is_reinforce_with_the_same_advantages(loss_mode, overrides, agg_mode):
    log_prob, _, advantages, response_mask, ratio = make_batch(seed=9)
    batch = (log_prob, log_prob.clone(), advantages, response_mask, ratio)  # pi_theta = mu: every ratio 1
    grad, metrics = gradient(loss_mode, batch, *overrides, agg_mode=agg_mode)
    reinforce = loss_and_gradient("rec_reinforce", agg_mode, batch)[1]
    directions = {(i, t): advantages[i, t].item() for i in range(len(response_mask)) for t in tokens_of(response_mask, i)}
    torch.testing.assert_close(grad, normalised(directions, response_mask, agg_mode), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(grad, reinforce, rtol=1e-5, atol=1e-7)
    assert metrics.get("actor/m2po_masked_fraction", 0) == 0
    assert metrics.get("actor/topr_negative_weight_mean", 1) == pytest.approx(1.0)
