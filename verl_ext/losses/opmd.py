"""OPMD (Kimi's online policy mirror descent), as REINFORCE plus a regulariser (arXiv 2509.24203, Section 4.2).

    L = -(1/K) sum_i A_i log pi_theta(y_i) + (beta / 2K) sum_i (log pi_theta(y_i) - log pi_old(y_i))^2

with log pi(y_i) = sum_t log pi(y_i^t): the square is of the whole response's log-ratio
S_i = sum_t Delta_it, not a sum of per-token squares. As a per-token matrix for verl's ``agg_loss``:

    loss[i, t] = -A_i Delta_it + (beta / 2) S_i^2 / |y_i|

The first term has the gradient of -A_i log pi_theta(y_i^t). The second, summed over the |y_i| tokens,
is (beta/2) S_i^2, and its gradient w.r.t. every token of y_i is beta * S_i, as the formula requires;
each aggregation mode then treats both terms alike.
"""

import torch

from verl_ext.losses.terms import LossTerms, prepare, ratio_metrics, response_lengths, sequence_mean, sequence_sum


def opmd_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    beta: float,
) -> LossTerms:
    tokens = prepare(log_prob, old_log_prob, advantages, response_mask)
    regulariser = 0.5 * beta * sequence_sum(tokens.delta).square()  # (beta/2) S_i^2 per response, (batch, 1)
    loss_matrix = -tokens.advantages * tokens.delta + (regulariser / response_lengths(tokens)) * tokens.mask
    metrics = ratio_metrics(tokens, torch.exp(tokens.delta.detach()))
    metrics["regularizer"] = sequence_mean(regulariser.detach(), tokens)
    return LossTerms(loss_matrix, metrics)
