"""AsymRE (Meta's asymmetric REINFORCE), as REINFORCE plus a regularizer (arXiv 2509.24203, Section 4.2).

The baseline is lowered from mean_j r_j to mean_j r_j - beta:

    L = -(1/K) sum_i (A_i + beta) log pi_theta(y_i)
      = REINFORCE loss  -  (beta/K) sum_i log pi_theta(y_i)       (an imitation term on the batch)

    loss[i, t] = -(A_i + beta) Delta_it        (the gradient of -(A_i + beta) log pi_theta(y_i^t))

with A_i = r_i - mean_j r_j from the ``rec`` estimator. The logged regularizer is -beta log pi_theta(y_i).
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.registry import REC, policy_loss
from verl_ext.algorithms.tokens import LossTerms, importance_ratio, prepare, ratio_metrics, sequence_mean, sequence_sum


@policy_loss("asymre", "AsymRE (Meta)", f"{REC}, Section 4.2", reads=("reg_coef",), old_log_prob="unused", regularizer=True)
def asymre_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    reg_coef: float,
) -> LossTerms:
    tokens = prepare(log_prob, old_log_prob, advantages, response_mask)
    beta = reg_coef
    loss_matrix = -(tokens.advantages + beta * tokens.mask) * tokens.delta
    metrics = ratio_metrics(tokens, importance_ratio(tokens.delta.detach()))
    with torch.no_grad():
        sequence_log_prob = sequence_sum(torch.where(tokens.mask, log_prob, torch.zeros((), dtype=log_prob.dtype)))
        metrics["regularizer"] = sequence_mean(-beta * sequence_log_prob, tokens)
    return LossTerms(loss_matrix, metrics)
