"""OPMD (Kimi's online policy mirror descent), as REINFORCE plus a regularizer (arXiv 2509.24203, Section 4.2).

Two forms of the regularizer, chosen by ``actor_rollout_ref.actor.policy_loss.reg_form``; both read
beta = ``policy_loss.reg_coef``, and S_i = sum_t Delta_it with Delta_it = log pi_theta(y_i^t) - log pi_old(y_i^t).

``sequence`` (the default, the paper's): the square of the whole response's log-ratio,

    L = -(1/K) sum_i A_i log pi_theta(y_i) + (beta / 2K) sum_i (log pi_theta(y_i) - log pi_old(y_i))^2
    loss[i, t] = -A_i Delta_it + (beta / 2) S_i^2 / |y_i|

The first term has the gradient of -A_i log pi_theta(y_i^t). The second, summed over the |y_i| tokens,
is (beta/2) S_i^2, and its gradient w.r.t. every token of y_i is beta * S_i, as the formula requires;
each aggregation mode then treats both terms alike.

``token``: a sum of per-token squares (the k2 estimator of KL(pi_old || pi_theta), (1/2) Delta^2, per token),

    loss[i, t] = -A_i Delta_it + (beta / 2) Delta_it^2        gradient per token: -A_i + beta Delta_it

the form of Trinity-RFT's REC code with its k2 regularizer and of verl's ``dro`` loss (``dro_beta`` = beta).
Trinity writes the term as c Delta^2 without the 1/2 (it absorbs the 1/2 into its coefficient), so its
``regularizer_coef`` c corresponds to beta = 2c here: c = 0.1 is ``reg_coef=0.2``. The two forms agree when a
response's log-ratio sits on one token; spread over n tokens with equal Delta, the sequence form's gradient
per token is n times the token form's.
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.hyperparameters import REG_FORMS
from verl_ext.algorithms.registry import REC, policy_loss
from verl_ext.algorithms.tokens import LossTerms, importance_ratio, prepare, ratio_metrics, response_lengths, sequence_mean, sequence_sum


@policy_loss("opmd", "OPMD (Kimi)", f"{REC}, Section 4.2", reads=("reg_coef", "reg_form"), regularizer=True)
def opmd_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    reg_coef: float,
    reg_form: str,
) -> LossTerms:
    tokens = prepare(log_prob, old_log_prob, advantages, response_mask)
    beta = reg_coef
    if reg_form == "sequence":
        per_response = 0.5 * beta * sequence_sum(tokens.delta).square()  # (beta/2) S_i^2, (batch, 1)
        per_token = (per_response / response_lengths(tokens)) * tokens.mask
    elif reg_form == "token":
        per_token = 0.5 * beta * tokens.delta.square()  # 0 on padding: delta is
        per_response = sequence_sum(per_token)
    else:
        raise ValueError(f"OPMD reg_form={reg_form!r}; allowed: {REG_FORMS}")
    loss_matrix = -tokens.advantages * tokens.delta + per_token
    metrics = ratio_metrics(tokens, importance_ratio(tokens.delta.detach()))
    metrics["regularizer"] = sequence_mean(per_response.detach(), tokens)
    return LossTerms(loss_matrix, metrics)
