"""REC-GSPO: REC with GSPO's sequence-level ratio and mask (arXiv 2509.24203, Appendix B.7).

    s_i = exp( (1/|y_i|) sum_t Delta_it )   (length-normalised sequence ratio; Delta = log pi_theta - log pi_old)
    M_i = 1(A_i > 0, s_i <= 1 + epsilon_high) + 1(A_i < 0, s_i >= 1 - epsilon_low)

    REC-GSPO-IS:    g = (1/|y_i|) sum_t grad log pi_theta(y_i^t) * A_i s_i M_i     loss[i, t] = -A_i s_i M_i
    REC-GSPO-NoIS:  g = (1/|y_i|) sum_t grad log pi_theta(y_i^t) * A_i M_i         loss[i, t] = -A_i M_i Delta_it

(grad s_i = s_i (1/|y_i|) sum_t grad log pi_t.) The (1/|y_i|) and the mean over responses are the
aggregation ``seq-mean-token-mean``, which the paper's formula implies: use
``actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean``. With token-mean the IS variant's weight
s_i M_i stays exact per token, but the sequence normalisation becomes verl's token normalisation.
GSPO-style epsilons are tiny: (6e-4, 8e-4) in the paper. epsilon_low, epsilon_high = ``clip_ratio_low``,
``clip_ratio_high`` (verl's ``actor.clip_ratio_low/high``); log s_i is clamped to +-20 as verl's losses clamp
the log-ratio (:func:`~verl_ext.algorithms.tokens.importance_ratio`).
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.masks import one_side_mask
from verl_ext.algorithms.hyperparameters import CLIPPING_RANGE
from verl_ext.algorithms.registry import REC, policy_loss
from verl_ext.algorithms.tokens import (LossTerms, clip_fraction_metrics, importance_ratio, prepare, ratio_metrics, response_lengths,
                                        sequence_mean, sequence_sum)

# the paper's formula is a mean over responses of token means (B.7): verl's aggregation of that name
SEQUENCE_MEAN_OF_TOKEN_MEANS = "seq-mean-token-mean"


@policy_loss("rec_gspo_is", "REC-GSPO-IS", f"{REC}, B.7", reads=CLIPPING_RANGE, paper_loss_agg_mode=SEQUENCE_MEAN_OF_TOKEN_MEANS,
             importance_sampling=True)
@policy_loss("rec_gspo_nois", "REC-GSPO-NoIS", f"{REC}, B.7", reads=CLIPPING_RANGE, paper_loss_agg_mode=SEQUENCE_MEAN_OF_TOKEN_MEANS,
             importance_sampling=False)
def rec_gspo_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    importance_sampling: bool,
    clip_ratio_low: float,
    clip_ratio_high: float,
) -> LossTerms:
    tokens = prepare(log_prob, old_log_prob, advantages, response_mask)
    lengths = response_lengths(tokens)
    sequence_ratio = importance_ratio(sequence_sum(tokens.delta) / lengths)  # s_i, (batch, 1)
    sequence_advantage = sequence_sum(tokens.advantages) / lengths
    mask = one_side_mask(sequence_ratio.detach(), sequence_advantage, clip_ratio_low, clip_ratio_high)  # (batch, 1)
    weight = -tokens.advantages * mask
    # A is 0 on padding, so -A s M is too
    loss_matrix = weight * sequence_ratio if importance_sampling else weight * tokens.delta
    metrics = ratio_metrics(tokens, importance_ratio(tokens.delta.detach()))
    metrics.update(clip_fraction_metrics(tokens, mask, split_by_sign=True))
    metrics["sequence_ratio_mean"] = sequence_mean(sequence_ratio.detach(), tokens)
    return LossTerms(loss_matrix, metrics)
