"""TOPR: Tapered Off-Policy REINFORCE (Le Roux, Bellemare et al., arXiv 2503.14286, Section 3).

The paper's update, with mu the behaviour policy that generated the trajectory tau and R(tau) its reward
minus the baseline (here the advantage A_i of the estimator, e.g. ``rec``'s r_i - mean_j r_j):

    grad J_TOPR = sum_{tau: R >= 0} mu(tau) R(tau) grad log pi(tau)
                + sum_{tau: R <  0} mu(tau) [pi(tau) / mu(tau)]_0^1 R(tau) grad log pi(tau)

Positive examples get plain REINFORCE (no importance weight, the SFT-like term); negative ones get the
importance ratio truncated to [0, 1] (a negative example the current policy has already made unlikely pushes
less). On-policy (pi = mu) every weight is 1 and TOPR is REINFORCE with the same advantages.

Per token, with the weight alpha held constant (a stop-gradient) and Delta_it = log pi_theta - log mu:

    loss[i, t] = -alpha_it A_i Delta_it            (gradient -alpha_it A_i grad log pi_theta(y_i^t))

``topr_ratio_level`` (``actor_rollout_ref.actor.policy_loss.topr_ratio_level``) chooses the ratio:

``sequence`` (the default, the paper's): pi(tau)/mu(tau) is the whole response's ratio, prod_t rho_it, so
    alpha_i = min(1, exp(sum_t Delta_it)) on every token of a response with A_i < 0, and 1 otherwise.
    Computed as exp(min(S_i, 0)): finite however long the response.
``token`` (Trinity-RFT's ``topr``): alpha_it = min(1, rho_it) on each token with A_i <= 0, 1 otherwise.
    The two agree on one-token responses; on longer ones the sequence weight is the product of the per-token
    ratios, so it is at most the smallest of them when all are below 1 and tapers much faster.

Which examples are truncated: the paper truncates R < 0 and Trinity A <= 0; a token with A = 0 has no
gradient, so the two tests give the same update. Aggregation is verl's ``actor.loss_agg_mode`` like every
verl-ext loss (the paper writes an expectation over trajectories of sum_t, which is ``seq-mean-token-sum``;
the preset keeps verl's default token-mean, as Trinity and the REC family do).
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.hyperparameters import TOPR_RATIO_LEVELS
from verl_ext.algorithms.registry import policy_loss
from verl_ext.algorithms.tokens import LossTerms, importance_ratio, prepare, ratio_metrics, sequence_sum



@policy_loss("topr", "TOPR (Tapered Off-Policy REINFORCE)", "arXiv 2503.14286, Section 3", reads=("topr_ratio_level",))
def topr_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    topr_ratio_level: str,
) -> LossTerms:
    tokens = prepare(log_prob, old_log_prob, advantages, response_mask)
    delta = tokens.delta.detach()
    if topr_ratio_level == "sequence":
        truncated = (tokens.advantages < 0) & tokens.mask
        taper = torch.exp(sequence_sum(delta).clamp(max=0.0)).expand_as(delta)  # min(1, pi(y_i)/mu(y_i)), per row
    elif topr_ratio_level == "token":
        truncated = (tokens.advantages <= 0) & tokens.mask
        taper = torch.exp(delta.clamp(max=0.0))  # min(1, rho_it)
    else:
        raise ValueError(f"TOPR topr_ratio_level={topr_ratio_level!r}; allowed: {TOPR_RATIO_LEVELS}")
    weight = torch.where(truncated, taper, torch.ones_like(taper))  # alpha, held constant
    loss_matrix = -(weight * tokens.advantages) * tokens.delta
    metrics = ratio_metrics(tokens, importance_ratio(delta))
    negative = (tokens.advantages < 0) & tokens.mask
    with torch.no_grad():
        count = negative.sum()
        # mean alpha over the tokens of negative examples (1 when the micro-batch has none: nothing truncated)
        metrics["topr_negative_weight_mean"] = (weight * negative).sum() / count if count > 0 else weight.new_ones(())
    return LossTerms(loss_matrix, metrics)
