"""AsymRE (Meta's asymmetric REINFORCE), as REINFORCE plus a regulariser (arXiv 2509.24203, Section 4.2).

The baseline is lowered from mean_j r_j to mean_j r_j - beta:

    L = -(1/K) sum_i (A_i + beta) log pi_theta(y_i)
      = REINFORCE loss  -  (beta/K) sum_i log pi_theta(y_i)       (an imitation term on the batch)

    loss[i, t] = -(A_i + beta) log pi_theta(y_i^t)

with A_i = r_i - mean_j r_j from the ``rec`` estimator. pi_old only enters the diagnostics.
"""

import torch

from verl_ext.losses.terms import LossTerms, log_ratio, ratio_metrics, sequence_mean, sequence_sum, valid


def asymre_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    beta: float,
) -> LossTerms:
    log_prob = valid(log_prob, response_mask)
    loss_matrix = -(valid(advantages, response_mask) + beta * response_mask.to(log_prob.dtype)) * log_prob
    metrics = ratio_metrics(log_ratio(log_prob, old_log_prob, response_mask), response_mask)
    metrics["regularizer"] = sequence_mean(-beta * sequence_sum(log_prob.detach(), response_mask), response_mask)
    return LossTerms(loss_matrix, metrics)
