"""OPMD (Kimi's online policy mirror descent), as REINFORCE plus a regulariser (arXiv 2509.24203, Section 4.2).

    L = -(1/K) sum_i A_i log pi_theta(y_i) + (beta / 2K) sum_i (log pi_theta(y_i) - log pi_old(y_i))^2

with log pi(y_i) = sum_t log pi(y_i^t): the square is of the whole response's log-ratio
S_i = sum_t Delta_it, not a sum of per-token squares. As a per-token matrix for verl's ``agg_loss``:

    loss[i, t] = -A_i log pi_theta(y_i^t) + (beta / 2) S_i^2 / |y_i|

The second term summed over the |y_i| tokens is (beta/2) S_i^2, and its gradient w.r.t. every token
of y_i is beta * S_i, as the formula requires; each aggregation mode then treats both terms alike.
"""

import torch

from verl_ext.losses.terms import LossTerms, log_ratio, ratio_metrics, response_lengths, sequence_mean, sequence_sum, valid


def opmd_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    beta: float,
) -> LossTerms:
    delta = log_ratio(log_prob, old_log_prob, response_mask)
    sequence_log_ratio = sequence_sum(delta, response_mask)  # S_i, (batch, 1)
    regulariser = 0.5 * beta * sequence_log_ratio.square()  # (beta/2) S_i^2 per response
    policy_gradient = -valid(advantages, response_mask) * valid(log_prob, response_mask)
    loss_matrix = policy_gradient + valid((regulariser / response_lengths(response_mask)).expand_as(delta), response_mask)
    metrics = ratio_metrics(delta, response_mask)
    metrics["regularizer"] = sequence_mean(regulariser.detach(), response_mask)
    return LossTerms(loss_matrix, metrics)
