"""RED-Weight: REINFORCE with pointwise response weights (arXiv 2509.24203, Section 4.3).

    g = sum_i w_i A_i grad log pi_theta(y_i),     w_i = exp(A_i / T)   (T = 1 in the paper)

    loss[i, t] = -w_i A_i Delta_it     (w_i held constant; the gradient of -w_i A_i log pi_theta(y_i^t))

Up-weighting high-reward responses equals pairwise-weighted REINFORCE (eq. 9) plus a regularizer
toward them. A_i / T is clamped to [-50, 50] so that w stays finite for tiny T.
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.hyperparameters import key_of
from verl_ext.algorithms.registry import REC, policy_loss
from verl_ext.algorithms.tokens import LossTerms, importance_ratio, prepare, ratio_metrics, response_lengths, sequence_max, sequence_mean, sequence_sum

MAX_EXPONENT = 50.0
TEMPERATURE = (key_of("weight_temperature"),)  # T's config key


@policy_loss("red_weight", "RED-Weight", f"{REC}, Section 4.3", reads=("weight_temperature",), old_log_prob="unused")
def red_weight_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    weight_temperature: float,
) -> LossTerms:
    tokens = prepare(log_prob, old_log_prob, advantages, response_mask)
    sequence_advantage = sequence_sum(tokens.advantages) / response_lengths(tokens)  # A_i, (batch, 1)
    weights = torch.exp((sequence_advantage / weight_temperature).clamp(-MAX_EXPONENT, MAX_EXPONENT))  # w_i, (batch, 1)
    loss_matrix = -(weights * tokens.advantages) * tokens.delta
    metrics = ratio_metrics(tokens, importance_ratio(tokens.delta.detach()))
    metrics["red_weight_mean"] = sequence_mean(weights, tokens)
    metrics["red_weight_max"] = sequence_max(weights, tokens)
    return LossTerms(loss_matrix, metrics)
