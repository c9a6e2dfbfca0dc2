"""Group-relative REINFORCE (arXiv 2509.24203, eq. 1b), with no clipping and no importance weight.

    g = sum_t grad log pi_theta(y_i^t | x, y_i^<t) * A_i,        A_i = r_i - mean_j r_j   (estimator "rec")

    loss[i, t] = -A_i * Delta_it        (the gradient of -A_i log pi_theta(y_i^t))

The paper's point: this update has an off-policy interpretation, but without a bound on the update it
can converge to a sub-optimal policy on stale data (Section 3's 3-arm bandit). pi_old only enters the
diagnostics (ratio, ppo_kl), which show how stale the batch is.
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.registry import REC, policy_loss
from verl_ext.algorithms.tokens import LossTerms, importance_ratio, prepare, ratio_metrics


@policy_loss("rec_reinforce", "group-relative REINFORCE", f"{REC}, eq. 1b", old_log_prob="unused")
def reinforce_loss(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor, response_mask: torch.Tensor
) -> LossTerms:
    tokens = prepare(log_prob, old_log_prob, advantages, response_mask)
    loss_matrix = -tokens.advantages * tokens.delta
    return LossTerms(loss_matrix, ratio_metrics(tokens, importance_ratio(tokens.delta.detach())))
