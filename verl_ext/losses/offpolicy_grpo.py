"""Off-policy GRPO ("Revisiting GRPO", arXiv 2505.22257, eq. 6).

Samples come from a stale policy alpha = pi_{k-v}; pi_k is the current policy before the update.
Token-wise, with r = pi_theta / alpha and r' = pi_k / alpha:

    f_epsilon(r, r', a) = min( r a,  clip(r, max(r' - epsilon_low, 0), r' + epsilon_high) a )
    loss[i, t] = -f_epsilon(r_it, r'_it, A_i)

so the ratio to the behaviour policy may move at most epsilon away from where pi_k already is.
In verl: ``old_log_prob`` = log pi_k (recomputed by the actor: ``rollout_correction.bypass_mode=false``)
and ``rollout_is_weights`` = r' (``rollout_correction.rollout_is=token`` with a threshold that does not
truncate), hence r = exp(log pi_theta - log pi_k) * r'. Advantages: verl's ``grpo`` estimator.
"""

import torch

from verl_ext.losses.terms import LossTerms, log_ratio, masked_mean, ratio_metrics, valid


def offpolicy_grpo_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    behaviour_ratio: torch.Tensor,
    *,
    epsilon_low: float,
    epsilon_high: float,
) -> LossTerms:
    delta = log_ratio(log_prob, old_log_prob, response_mask)  # log pi_theta - log pi_k
    behaviour_ratio = valid(behaviour_ratio.detach(), response_mask)  # r'
    ratio = torch.exp(delta) * behaviour_ratio  # r
    advantages = valid(advantages, response_mask)
    lower = (behaviour_ratio - epsilon_low).clamp_min(0)
    upper = behaviour_ratio + epsilon_high
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, lower, upper)
    loss_matrix = torch.maximum(unclipped, clipped)
    metrics = ratio_metrics(delta, response_mask)
    with torch.no_grad():
        metrics["pg_clipfrac"] = masked_mean((clipped > unclipped).to(torch.float32), response_mask)
        metrics["behaviour_ratio_mean"] = masked_mean(behaviour_ratio, response_mask)
    return LossTerms(loss_matrix, metrics)
