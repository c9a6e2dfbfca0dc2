"""M2PO: Second-Moment Trust Policy Optimization (Zheng, Zhao, Chen, arXiv 2510.01161, Algorithm 1).

M2PO replaces PPO's epsilon-clip by a bound on the second moment of the log importance ratio. With
Delta_j = log pi_theta(a_j) - log mu(a_j) (mu the behaviour policy that generated the batch) over a set T of
tokens:

    M2_hat(T) = (1/|T|) sum_{j in T} Delta_j^2

Algorithm 1 (the mask): M = 1 on every token; while M2_hat(T) > tau_M2, remove from T the token with the
largest Delta^2 and set its M to 0. Removing the largest term never raises the mean, so the loop removes the
k largest Delta^2 of T for the smallest k whose remaining mean is <= tau_M2 (k = |T| empties T, whose mean
counts as 0); that is how it is computed here, by one sort (ties go by position). The kept tokens of T then
satisfy the bound: M2_hat(T minus the masked) <= tau_M2.

The objective, a token mean of the importance-weighted advantage over unmasked tokens:

    J_M2PO = (1 / sum_i |o_i|) sum_i sum_t M_it rho_it A_it,        rho_it = exp(Delta_it)
    loss[i, t] = -M_it A_it rho_it                 (gradient -M_it A_it rho_it grad log pi_theta(y_i^t))

No epsilon-clip: a token is either kept with its full ratio or masked. On-policy (rho = 1) M2_hat = 0 <= tau,
nothing is masked, and the gradient is REINFORCE's with the same advantages. tau_M2 =
``policy_loss.m2_threshold`` (0.04, the value the paper uses in every experiment).

``m2_tokens`` (``policy_loss.m2_tokens``) chooses T, i.e. which tokens are measured and can be masked:

``trust_region`` (the default, the paper's): Algorithm 1 takes T = "all trust-region tokens". The authors'
    code (github.com/Infini-AI-Lab/M2PO, read for facts) defines those as the tokens whose ratio moved in the
    direction of their advantage, (A > 0 and rho > 1) or (A < 0 and rho < 1): the tokens PPO's clip can act on.
    The other tokens are never masked and do not enter M2_hat.
``all`` (AReaL's ``m2_threshold``): T = every response token, whatever its advantage or ratio.

Both are computed over the tokens of one call, i.e. verl's micro-batch on one data-parallel rank (as in both
peers' code); with ``ppo_micro_batch_size_per_gpu`` = the mini-batch and one GPU it is the paper's batch.

rho is computed from Delta clamped to +-20, as verl's losses clamp the log-ratio
(:func:`~verl_ext.algorithms.tokens.importance_ratio`): a masked token far off-policy (Delta >= 89 overflows
exp in float32) would otherwise turn its 0 x inf into a NaN loss and gradient. M2_hat and the mask use the
unclamped Delta, the paper's statistic.
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.hyperparameters import M2_TOKEN_SETS
from verl_ext.algorithms.registry import policy_loss
from verl_ext.algorithms.tokens import LossTerms, clip_fraction_metrics, importance_ratio, prepare, ratio_metrics



def second_moment_mask(squared: torch.Tensor, candidates: torch.Tensor, threshold: float) -> torch.Tensor:
    """Algorithm 1: False on the largest ``squared`` values among ``candidates``, as few as leave a mean <= threshold.

    ``squared`` holds Delta^2 (any shape), ``candidates`` is the set T (bool, same shape); tokens outside T stay True.
    """
    values = squared[candidates]
    keep = torch.ones_like(squared, dtype=torch.bool)
    if values.numel() == 0:
        return keep
    order = torch.argsort(values, descending=True, stable=True)
    descending = values[order]
    # mean of what remains after removing the k largest, for k = 0 .. n-1 (k = n leaves nothing: mean 0)
    remaining_sums = descending.flip(0).cumsum(0).flip(0)
    remaining_counts = torch.arange(values.numel(), 0, -1, dtype=values.dtype, device=values.device)
    within = (remaining_sums / remaining_counts) <= threshold
    removed = int(torch.nonzero(within)[0]) if within.any() else values.numel()
    kept_in_order = torch.ones_like(values, dtype=torch.bool)
    kept_in_order[order[:removed]] = False
    keep[candidates] = kept_in_order
    return keep


@policy_loss("m2po", "M2PO (Second-Moment Trust Policy Optimization)", "arXiv 2510.01161, Algorithm 1",
             reads=("m2_threshold", "m2_tokens"), grpo_advantages=True)
def m2po_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    m2_threshold: float,
    m2_tokens: str,
) -> LossTerms:
    batch = prepare(log_prob, old_log_prob, advantages, response_mask)
    ratio = importance_ratio(batch.delta)  # clamped as verl's losses: a masked token's exp() never overflows
    with torch.no_grad():
        delta = batch.delta.detach()
        if m2_tokens == "trust_region":
            candidates = batch.mask & (((batch.advantages > 0) & (delta > 0)) | ((batch.advantages < 0) & (delta < 0)))
        elif m2_tokens == "all":
            candidates = batch.mask
        else:
            raise ValueError(f"M2PO m2_tokens={m2_tokens!r}; allowed: {M2_TOKEN_SETS}")
        squared = delta.square()
        keep = second_moment_mask(squared, candidates, m2_threshold)
        kept = candidates & keep
    loss_matrix = -(batch.advantages * keep) * ratio
    metrics = ratio_metrics(batch, ratio)
    metrics.update(clip_fraction_metrics(batch, keep, split_by_sign=True))
    with torch.no_grad():
        zero = squared.new_zeros(())
        candidate_count, kept_count = candidates.sum(), kept.sum()
        metrics["m2po_second_moment"] = squared[candidates].sum() / candidate_count if candidate_count > 0 else zero
        metrics["m2po_second_moment_kept"] = squared[kept].sum() / kept_count if kept_count > 0 else zero
        metrics["m2po_masked_fraction"] = (batch.mask & ~keep).sum() / batch.count
    return LossTerms(loss_matrix, metrics)
