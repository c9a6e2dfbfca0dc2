"""Every clipping mask at its bounds, exactly: the papers' inequalities are not strict (arXiv 2509.24203, eqs. 8, 18,
19-21 and B.7; ../shared/docs/algorithms.md), so a ratio exactly at 1 - epsilon or 1 + epsilon keeps its gradient and
the next float outside does not. Checked on the pure masks (verl_ext/algorithms/masks.py) and through each loss that
uses them (REC-OneSide/TwoSide/Ring, IS and NoIS, and the sequence-level REC-GSPO), with the ratio made from a
log-ratio as the losses make it, in float32 and float64.

The epsilons are binary fractions (0.25, 0.5; outer 0.5, 1.0), so each bound (0.75, 1.5, 0.5, 2.0) is a float
exactly, and "the next float outside" is one ulp away."""

import math

import pytest
import torch

from verl_ext.algorithms.masks import one_side_mask, ring_mask, two_side_mask
from verl_ext.algorithms.registry import POLICY_LOSSES, default_hyperparameters
from verl_ext.algorithms.tokens import importance_ratio

EPS_LOW, EPS_HIGH, OUTER_LOW, OUTER_HIGH = 0.25, 0.5, 0.5, 1.0
LOW, HIGH, OUTER_L, OUTER_H = 1 - EPS_LOW, 1 + EPS_HIGH, 1 - OUTER_LOW, 1 + OUTER_HIGH  # 0.75, 1.5, 0.5, 2.0
DTYPES = (torch.float32, torch.float64)


def at(bound):
    return ("at", bound)


def below(bound):
    return ("below", bound)


def above(bound):
    return ("above", bound)


def value_of(point, dtype) -> float:
    where, bound = point
    exact = torch.tensor(bound, dtype=dtype)
    if where == "at":
        return exact
    return torch.nextafter(exact, torch.tensor(math.inf if where == "above" else -math.inf, dtype=dtype))


# (point, sign of A, kept) for each mask, from the inequalities as the paper writes them
ONE_SIDE = [
    (at(HIGH), +1, 1), (above(HIGH), +1, 0), (at(LOW), +1, 1), (below(LOW), +1, 1), (at(OUTER_L), +1, 1),
    (at(LOW), -1, 1), (below(LOW), -1, 0), (at(HIGH), -1, 1), (above(HIGH), -1, 1), (at(OUTER_H), -1, 1),
    (at(1.0), 0, 0),
]
TWO_SIDE = [
    (at(LOW), sign, 1) for sign in (+1, -1)
] + [(below(LOW), sign, 0) for sign in (+1, -1)] + [(at(HIGH), sign, 1) for sign in (+1, -1)] + [
    (above(HIGH), sign, 0) for sign in (+1, -1)
]
RING = [
    # the inner band, both signs
    *[(at(LOW), sign, 1) for sign in (+1, -1)], *[(below(LOW), sign, 0) for sign in (+1, -1)],
    *[(at(HIGH), sign, 1) for sign in (+1, -1)], *[(above(HIGH), sign, 0) for sign in (+1, -1)],
    # A > 0 again at and below 1 - epsilon'_low; A < 0 again at and above 1 + epsilon'_high
    (at(OUTER_L), +1, 1), (above(OUTER_L), +1, 0), (below(OUTER_L), +1, 1), (at(OUTER_L), -1, 0),
    (at(OUTER_H), -1, 1), (below(OUTER_H), -1, 0), (above(OUTER_H), -1, 1), (at(OUTER_H), +1, 0),
]
MASKS = {
    "one_side": (lambda ratio, advantages: one_side_mask(ratio, advantages, EPS_LOW, EPS_HIGH), ONE_SIDE),
    "two_side": (lambda ratio, advantages: two_side_mask(ratio, EPS_LOW, EPS_HIGH), TWO_SIDE),
    "ring": (lambda ratio, advantages: ring_mask(ratio, advantages, EPS_LOW, EPS_HIGH, OUTER_LOW, OUTER_HIGH), RING),
}


def describe(cases) -> list[str]:
    return [f"{where} {bound} A={sign:+d}" for (where, bound), sign, _kept in cases]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", MASKS)
def test_each_mask_at_its_bounds_and_one_float_outside(name, dtype):
    mask, cases = MASKS[name]
    ratio = torch.stack([value_of(point, dtype) for point, _sign, _kept in cases])
    advantages = torch.tensor([float(sign) for _point, sign, _kept in cases], dtype=dtype)
    got = mask(ratio, advantages).tolist()
    expected = [float(kept) for _point, _sign, kept in cases]
    wrong = [case for case, g, e in zip(describe(cases), got, expected) if g != e]
    assert not wrong, f"{name}: wrong at {wrong}"


# --- through the losses: the ratio made from a log-ratio, as each loss makes it --------------------------------------

def log_ratio_for(point, dtype) -> torch.Tensor:
    """A log-ratio whose ratio, as the losses compute it (importance_ratio), is the point's float exactly: the bound
    itself, or the first ratio beyond it (one ulp outside)."""
    target = value_of(point, dtype)
    where = point[0]
    guess = torch.tensor(math.log(float(target)), dtype=dtype)
    step = torch.tensor(math.inf if where != "below" else -math.inf, dtype=dtype)
    back = torch.tensor(-math.inf if where != "below" else math.inf, dtype=dtype)
    # walk back until the ratio is on the inner side of the target, then forward to the first log-ratio that reaches it
    candidate = guess
    for _ in range(64):
        ratio = importance_ratio(candidate)
        if (ratio < target) if where != "below" else (ratio > target):
            break
        candidate = torch.nextafter(candidate, back)
    for _ in range(128):
        if importance_ratio(candidate) == target:
            return candidate
        candidate = torch.nextafter(candidate, step)
    raise AssertionError(f"no log-ratio gives exactly {float(target)!r} in {dtype}")


TOKEN_LOSSES = {
    "rec_oneside_is": ONE_SIDE, "rec_oneside_nois": ONE_SIDE,
    "rec_twoside_is": TWO_SIDE, "rec_twoside_nois": TWO_SIDE,
    "rec_ring_is": RING, "rec_ring_nois": RING,
}
SEQUENCE_LOSSES = {"rec_gspo_is": ONE_SIDE, "rec_gspo_nois": ONE_SIDE}  # the sequence one-side mask of B.7


def hyperparameters():
    values = default_hyperparameters()
    values.update(clip_ratio_low=EPS_LOW, clip_ratio_high=EPS_HIGH, outer_clip_ratio_low=OUTER_LOW,
                  outer_clip_ratio_high=OUTER_HIGH)
    return values


def kept_by_gradient(name, log_ratio, advantages, response_mask) -> list[int]:
    """1 for each response whose tokens get a gradient from loss ``name``, 0 for those that get none."""
    log_prob = log_ratio.clone().requires_grad_(True)
    terms = POLICY_LOSSES[name].compute(log_prob, torch.zeros_like(log_ratio), advantages, response_mask, None,
                                        hyperparameters())
    (terms.loss_matrix * response_mask).sum().backward()
    return [int(bool((row != 0).any())) for row in log_prob.grad]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", TOKEN_LOSSES)
def test_each_token_loss_keeps_the_gradient_exactly_up_to_its_bounds(name, dtype):
    """One response of one token per case: the token's gradient is there exactly when the paper's mask keeps it."""
    cases = TOKEN_LOSSES[name]
    log_ratio = torch.stack([log_ratio_for(point, dtype) for point, _sign, _kept in cases]).unsqueeze(1)
    advantages = torch.tensor([[float(sign)] for _point, sign, _kept in cases], dtype=dtype)
    got = kept_by_gradient(name, log_ratio, advantages, torch.ones_like(log_ratio))
    wrong = [case for case, g, (_p, _s, kept) in zip(describe(cases), got, cases) if g != kept]
    assert not wrong, f"{name}: wrong at {wrong}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", SEQUENCE_LOSSES)
def test_the_sequence_loss_masks_whole_responses_exactly_at_its_bounds(name, dtype):
    """REC-GSPO: s_i = exp(mean_t Delta_it) at a bound keeps the whole response, one float outside drops it. Each
    response has two tokens of log-ratio d (their mean is d exactly, which gives the bound); a third, padded token
    with a huge log-ratio must not count."""
    cases = SEQUENCE_LOSSES[name]
    rows = []
    for point, _sign, _kept in cases:
        mean = log_ratio_for(point, dtype)
        rows.append(torch.stack([mean, mean, torch.tensor(30.0, dtype=dtype)]))
    log_ratio = torch.stack(rows)
    advantages = torch.tensor([[float(sign)] * 3 for _point, sign, _kept in cases], dtype=dtype)
    response_mask = torch.tensor([[1.0, 1.0, 0.0]] * len(cases), dtype=dtype)
    got = kept_by_gradient(name, log_ratio, advantages, response_mask)
    wrong = [case for case, g, (_p, _s, kept) in zip(describe(cases), got, cases) if g != kept]
    assert not wrong, f"{name}: wrong at {wrong}"
