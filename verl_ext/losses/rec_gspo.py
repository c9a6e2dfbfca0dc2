"""REC-GSPO: REC with GSPO's sequence-level ratio and mask (arXiv 2509.24203, Appendix B.7).

    s_i = exp( (1/|y_i|) sum_t Delta_it )   (length-normalised sequence ratio; Delta = log pi_theta - log pi_old)
    M_i = 1(A_i > 0, s_i <= 1 + epsilon_high) + 1(A_i < 0, s_i >= 1 - epsilon_low)

    REC-GSPO-IS:    g = (1/|y_i|) sum_t grad log pi_theta(y_i^t) * A_i s_i M_i     loss[i, t] = -A_i s_i M_i
    REC-GSPO-NoIS:  g = (1/|y_i|) sum_t grad log pi_theta(y_i^t) * A_i M_i         loss[i, t] = -A_i M_i log pi_theta(y_i^t)

(grad s_i = s_i (1/|y_i|) sum_t grad log pi_t.) The (1/|y_i|) and the mean over responses are the
aggregation ``seq-mean-token-mean``, which the paper's formula implies: use
``actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean``. With token-mean the IS variant's weight
s_i M_i stays exact per token, but the sequence normalisation becomes verl's token normalisation.
GSPO-style epsilons are tiny: (6e-4, 8e-4) in the paper.
"""

import torch

from verl_ext.losses.terms import (
    LossTerms,
    clip_fraction_metrics,
    log_ratio,
    ratio_metrics,
    response_lengths,
    sequence_mean,
    sequence_sum,
    valid,
)
from verl_ext.masks import one_side_mask


def rec_gspo_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    importance_sampling: bool,
    epsilon_low: float,
    epsilon_high: float,
) -> LossTerms:
    delta = log_ratio(log_prob, old_log_prob, response_mask)
    sequence_ratio = torch.exp(sequence_sum(delta, response_mask) / response_lengths(response_mask))  # (batch, 1)
    advantages = valid(advantages, response_mask)
    sequence_advantage = sequence_sum(advantages, response_mask) / response_lengths(response_mask)
    mask = one_side_mask(sequence_ratio.detach(), sequence_advantage, epsilon_low, epsilon_high)  # (batch, 1)
    if importance_sampling:
        loss_matrix = valid((-advantages * sequence_ratio * mask), response_mask)
    else:
        loss_matrix = -advantages * mask * valid(log_prob, response_mask)
    metrics = ratio_metrics(delta, response_mask)
    metrics.update(clip_fraction_metrics(mask, advantages, response_mask, split_by_sign=True))
    metrics["sequence_ratio_mean"] = sequence_mean(sequence_ratio.detach(), response_mask)
    return LossTerms(loss_matrix, metrics)
