"""RED-Weight: REINFORCE with pointwise response weights (arXiv 2509.24203, Section 4.3).

    g = sum_i w_i A_i grad log pi_theta(y_i),     w_i = exp(A_i / T)   (T = 1 in the paper)

    loss[i, t] = -w_i A_i log pi_theta(y_i^t)     (w_i held constant)

Up-weighting high-reward responses equals pairwise-weighted REINFORCE (eq. 9) plus a regulariser
toward them. A_i / T is clamped to [-50, 50] so that w stays finite for tiny T.
"""

import torch

from verl_ext.losses.terms import LossTerms, log_ratio, ratio_metrics, sequence_max, sequence_mean, sequence_values, valid

MAX_EXPONENT = 50.0


def red_weight_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    temperature: float,
) -> LossTerms:
    advantages = valid(advantages, response_mask)
    weights = torch.exp((advantages / temperature).clamp(-MAX_EXPONENT, MAX_EXPONENT)).detach()
    loss_matrix = -weights * advantages * valid(log_prob, response_mask)
    metrics = ratio_metrics(log_ratio(log_prob, old_log_prob, response_mask), response_mask)
    sequence_weights = torch.exp((sequence_values(advantages, response_mask) / temperature).clamp(-MAX_EXPONENT, MAX_EXPONENT))
    metrics["red_weight_mean"] = sequence_mean(sequence_weights, response_mask)
    metrics["red_weight_max"] = sequence_max(sequence_weights, response_mask)
    return LossTerms(loss_matrix, metrics)
