"""REC: REINFORCE with clipping (arXiv 2509.24203, Section 4.1 and Appendix B.3), token-wise.

With rho_it = pi_theta(y_i^t) / pi_old(y_i^t), A_i = r_i - mean_j r_j, and a mask M_it:

    REC-*-IS:    g = sum_t grad log pi_theta(y_i^t) * A_i * rho_it * M_it      loss[i, t] = -A_i rho_it M_it
    REC-*-NoIS:  g = sum_t grad log pi_theta(y_i^t) * A_i * M_it               loss[i, t] = -A_i M_it Delta_it

(grad rho = rho * grad log pi, and M is held constant, so each loss has exactly the gradient g.)

The mask names the variant (see :mod:`verl_ext.algorithms.masks`):
    "one_side"  REC-OneSide, eq. (8): the mask GRPO's clipped objective implies; -IS with std-normalised
                advantages is GRPO's gradient.
    "two_side"  REC-TwoSide, eq. (18)
    "ring"      REC-Ring, eqs. (19)-(21), with the outer margins epsilon'_low, epsilon'_high.

Hyperparameters (:mod:`verl_ext.algorithms.hyperparameters`): epsilon_low, epsilon_high = ``clip_ratio_low``,
``clip_ratio_high`` (verl's ``actor.clip_ratio_low/high``); epsilon'_low, epsilon'_high = ``outer_clip_ratio_low``,
``outer_clip_ratio_high`` (``policy_loss.*``). rho is computed from the log-ratio clamped to +-20 as verl's losses
do (:func:`~verl_ext.algorithms.tokens.importance_ratio`).
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.masks import one_side_mask, ring_mask, two_side_mask
from verl_ext.algorithms.hyperparameters import CLIPPING_RANGE, key_of
from verl_ext.algorithms.registry import REC, policy_loss
from verl_ext.algorithms.tokens import LossTerms, clip_fraction_metrics, importance_ratio, prepare, ratio_metrics

CLIPPING_MASKS = ("one_side", "two_side", "ring")
RING_READ = CLIPPING_RANGE + ("outer_clip_ratio_low", "outer_clip_ratio_high")
OUTER_MARGINS = tuple(key_of(name) for name in RING_READ[2:])  # their config keys


def rec_mask(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    clipping: str,
    epsilon_low: float,
    epsilon_high: float,
    outer_epsilon_low: float | None = None,
    outer_epsilon_high: float | None = None,
) -> torch.Tensor:
    if clipping == "one_side":
        return one_side_mask(ratio, advantages, epsilon_low, epsilon_high)
    if clipping == "two_side":
        return two_side_mask(ratio, epsilon_low, epsilon_high)
    if clipping == "ring":
        return ring_mask(ratio, advantages, epsilon_low, epsilon_high, outer_epsilon_low, outer_epsilon_high)
    raise ValueError(f"clipping={clipping!r}; allowed: {CLIPPING_MASKS}")


@policy_loss("rec_oneside_is", "REC-OneSide-IS", f"{REC}, eq. 8", reads=CLIPPING_RANGE, clipping="one_side", importance_sampling=True)
@policy_loss("rec_oneside_nois", "REC-OneSide-NoIS", f"{REC}, eq. 8", reads=CLIPPING_RANGE, clipping="one_side", importance_sampling=False)
@policy_loss("rec_twoside_is", "REC-TwoSide-IS", f"{REC}, eq. 18", reads=CLIPPING_RANGE, clipping="two_side", importance_sampling=True)
@policy_loss("rec_twoside_nois", "REC-TwoSide-NoIS", f"{REC}, eq. 18", reads=CLIPPING_RANGE, clipping="two_side", importance_sampling=False)
@policy_loss("rec_ring_is", "REC-Ring-IS", f"{REC}, eqs. 19-21", reads=RING_READ, uses_outer_margins=True, clipping="ring",
             importance_sampling=True)
@policy_loss("rec_ring_nois", "REC-Ring-NoIS", f"{REC}, eqs. 19-21", reads=RING_READ, uses_outer_margins=True, clipping="ring",
             importance_sampling=False)
def rec_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clipping: str,
    importance_sampling: bool,
    clip_ratio_low: float,
    clip_ratio_high: float,
    outer_clip_ratio_low: float | None = None,  # read by the ring variants only
    outer_clip_ratio_high: float | None = None,
) -> LossTerms:
    tokens = prepare(log_prob, old_log_prob, advantages, response_mask)
    ratio = importance_ratio(tokens.delta)
    mask = rec_mask(ratio.detach(), tokens.advantages, clipping, clip_ratio_low, clip_ratio_high, outer_clip_ratio_low,
                    outer_clip_ratio_high)
    weight = -tokens.advantages * mask
    loss_matrix = weight * ratio if importance_sampling else weight * tokens.delta
    metrics = ratio_metrics(tokens, ratio)
    metrics.update(clip_fraction_metrics(tokens, mask, split_by_sign=clipping != "two_side"))
    return LossTerms(loss_matrix, metrics)
