"""What every verl-ext loss shares: its sanitised inputs, the per-token loss matrix it returns, and
its diagnostics.

Tensors are (batch, response_length), one row per response; ``response_mask`` is 1 on response tokens
and 0 on padding. Padding positions may hold any value (even inf or NaN), so :func:`prepare` first sets
them to 0: a masked token never turns the loss or its gradient into NaN. Losses are written with
Delta = log pi_theta - log pi_old in place of log pi_theta where only the gradient matters: the two
have the same gradient (pi_old is a constant), and the loss then reads 0 when pi_theta = pi_old. A ratio
exp(Delta) is taken through :func:`importance_ratio`, which clamps Delta as verl's losses do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verl_ext.algorithms.lazy_torch import torch


# verl's losses clamp the log-ratio to [-20, 20] before exponentiating it (compute_policy_loss_vanilla and most
# of its registry): exp(89) already overflows float32, and a token a mask removes would turn inf x 0 into NaN,
# in the loss and in its gradient.
LOG_RATIO_BOUND = 20.0


@dataclass
class Tokens:
    """A batch of responses, 0 on padding."""

    mask: torch.Tensor  # bool, response tokens
    delta: torch.Tensor  # Delta_it = log pi_theta - log pi_old (differentiable through log pi_theta)
    advantages: torch.Tensor  # A_i on each token of response i
    count: torch.Tensor  # number of response tokens (at least 1)


def prepare(log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor, response_mask: torch.Tensor) -> Tokens:
    mask = response_mask.bool()
    zero = torch.zeros((), dtype=log_prob.dtype)
    return Tokens(
        mask=mask,
        delta=torch.where(mask, log_prob - old_log_prob, zero),
        advantages=torch.where(mask, advantages, zero),
        count=mask.sum().clamp_min(1),
    )


def importance_ratio(log_ratio: torch.Tensor) -> torch.Tensor:
    """rho = exp(Delta) with Delta clamped to [-20, 20], as verl's losses compute it: always finite, equal to
    exp(Delta) within the bound; beyond it rho carries no gradient (the clamp's derivative is 0), as in verl."""
    return torch.exp(log_ratio.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND))


@dataclass
class LossTerms:
    """A loss before aggregation: ``loss_matrix[i, t]`` is token t of response i's share of the loss.

    verl's ``agg_loss`` turns it into the scalar (token-mean, seq-mean-token-mean, ...), so every loss
    is invariant to data-parallel size and micro-batching in the same way as verl's own.
    ``metrics`` are detached scalars, logged as ``actor/<name>``.
    """

    loss_matrix: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


def response_lengths(tokens: Tokens) -> torch.Tensor:
    """|y_i| as a (batch, 1) float tensor, at least 1 so that empty rows stay finite."""
    return tokens.mask.sum(dim=-1, keepdim=True).to(tokens.delta.dtype).clamp_min(1)


def ratio_metrics(tokens: Tokens, ratio: torch.Tensor) -> dict[str, torch.Tensor]:
    """``ppo_kl`` = mean(-Delta) (verl's estimate of KL(pi_old || pi_theta)), and the ratio's mean and max.

    ``ratio`` is :func:`importance_ratio` of Delta (1 on padding). The max is per micro-batch; verl averages metrics over them.
    """
    with torch.no_grad():
        valid_ratio = ratio * tokens.mask
        return {
            "ppo_kl": -tokens.delta.sum() / tokens.count,
            "ratio_mean": valid_ratio.sum() / tokens.count,
            "ratio_max": valid_ratio.max() if valid_ratio.numel() else ratio.new_zeros(()),
        }


def clip_fraction_metrics(tokens: Tokens, mask: torch.Tensor, split_by_sign: bool) -> dict[str, torch.Tensor]:
    """Fraction of response tokens whose gradient the mask removed (tokens with A = 0 carry none anyway).

    ``pg_clipfrac`` counts every masked-out token with A != 0; with ``split_by_sign`` the parts with
    A > 0 (``pg_clipfrac_positive``) and A < 0 (``pg_clipfrac_negative``) are reported too; they sum
    to ``pg_clipfrac``. Token-level masks and sequence masks (shape (batch, 1)) both work.
    """
    with torch.no_grad():
        removed = mask == 0  # broadcasts a (batch, 1) sequence mask over the tokens
        positive = (removed & (tokens.advantages > 0)).sum() / tokens.count
        negative = (removed & (tokens.advantages < 0)).sum() / tokens.count
        metrics = {"pg_clipfrac": positive + negative}
        if split_by_sign:
            metrics["pg_clipfrac_positive"] = positive
            metrics["pg_clipfrac_negative"] = negative
        return metrics


def sequence_sum(values: torch.Tensor) -> torch.Tensor:
    """sum_t values[i, t] (values already 0 on padding), as a (batch, 1) tensor."""
    return values.sum(dim=-1, keepdim=True)


def sequence_mean(values: torch.Tensor, tokens: Tokens) -> torch.Tensor:
    """Mean over responses with at least one token of a (batch, 1) per-response quantity."""
    rows = tokens.mask.any(dim=-1)
    return values.squeeze(-1)[rows].mean() if rows.any() else values.new_zeros(())


def sequence_max(values: torch.Tensor, tokens: Tokens) -> torch.Tensor:
    rows = tokens.mask.any(dim=-1)
    return values.squeeze(-1)[rows].max() if rows.any() else values.new_zeros(())
