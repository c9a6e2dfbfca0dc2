"""Off-policy GRPO ("Revisiting GRPO", arXiv 2505.22257, eq. 6).

Samples come from a stale policy alpha = pi_{k-v}; pi_k is the current policy before the update.
Token-wise, with r = pi_theta / alpha and r' = pi_k / alpha:

    f_epsilon(r, r', a) = min( r a,  clip(r, max(r' - epsilon_low, 0), r' + epsilon_high) a )
    loss[i, t] = -f_epsilon(r_it, r'_it, A_i)

so the ratio to the behaviour policy may move at most epsilon away from where pi_k already is.
In verl: ``old_log_prob`` = log pi_k (recomputed by the actor: ``rollout_correction.bypass_mode=false``)
and ``rollout_is_weights`` = r' (``rollout_correction.rollout_is=token`` with a threshold that does not
truncate), hence r = exp(log pi_theta - log pi_k) * r', the log-ratio clamped to +-20 as verl's losses do.
epsilon_low, epsilon_high = ``clip_ratio_low``, ``clip_ratio_high``. Advantages: verl's ``grpo`` estimator.
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.hyperparameters import CLIPPING_RANGE
from verl_ext.algorithms.registry import policy_loss
from verl_ext.algorithms.tokens import LossTerms, importance_ratio, prepare, ratio_metrics


@policy_loss("offpolicy_grpo", "off-policy GRPO", "arXiv 2505.22257, eq. 6", reads=CLIPPING_RANGE,
             old_log_prob="current_and_behaviour", grpo_advantages=True)
def offpolicy_grpo_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    behaviour_ratio: torch.Tensor | None,
    *,
    clip_ratio_low: float,
    clip_ratio_high: float,
) -> LossTerms:
    if behaviour_ratio is None:
        raise ValueError(
            "offpolicy_grpo received no rollout_is_weights (r' = pi_k / alpha): set "
            "algorithm.rollout_correction.bypass_mode=false and algorithm.rollout_correction.rollout_is=token"
        )
    tokens = prepare(log_prob, old_log_prob, advantages, response_mask)  # Delta = log pi_theta - log pi_k
    current_ratio = importance_ratio(tokens.delta)
    behaviour_ratio = torch.where(tokens.mask, behaviour_ratio.detach(), torch.zeros((), dtype=current_ratio.dtype))  # r'
    ratio = current_ratio * behaviour_ratio  # r
    unclipped = -tokens.advantages * ratio
    clipped = -tokens.advantages * torch.clamp(ratio, (behaviour_ratio - clip_ratio_low).clamp_min(0), behaviour_ratio + clip_ratio_high)
    loss_matrix = torch.maximum(unclipped, clipped)
    metrics = ratio_metrics(tokens, current_ratio)
    with torch.no_grad():
        metrics["pg_clipfrac"] = (clipped > unclipped).sum() / tokens.count
        metrics["behaviour_ratio_mean"] = behaviour_ratio.sum() / tokens.count
    return LossTerms(loss_matrix, metrics)
