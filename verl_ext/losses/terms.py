"""What every verl-ext loss shares: the per-token loss matrix it returns, and its diagnostics.

Tensors are (batch, response_length), one row per response; ``response_mask`` is 1 on response tokens
and 0 on padding. Padding positions may hold any value (even inf), so every function here first sets
them to 0: a masked token can never turn the loss or its gradient into NaN.
"""

from dataclasses import dataclass, field

import torch


@dataclass
class LossTerms:
    """A loss before aggregation: ``loss_matrix[i, t]`` is token t of response i's share of the loss.

    verl's ``agg_loss`` turns it into the scalar (token-mean, seq-mean-token-mean, ...), so every loss
    is invariant to data-parallel size and micro-batching in the same way as verl's own.
    ``metrics`` are detached scalars, logged as ``actor/<name>``.
    """

    loss_matrix: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


def valid(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``values`` on response tokens, 0 on padding."""
    return torch.where(response_mask.bool(), values, torch.zeros_like(values))


def masked_mean(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    mask = response_mask.to(values.dtype)
    return (valid(values, response_mask) * mask).sum() / mask.sum().clamp_min(1)


def response_lengths(response_mask: torch.Tensor) -> torch.Tensor:
    """|y_i| as a (batch, 1) float tensor, at least 1 so that empty rows stay finite."""
    return response_mask.sum(dim=-1, keepdim=True).to(torch.float32).clamp_min(1)


def sequence_sum(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """sum_t values[i, t] over response tokens, as a (batch, 1) tensor."""
    return valid(values, response_mask).sum(dim=-1, keepdim=True)


def log_ratio(log_prob: torch.Tensor, old_log_prob: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Delta_it = log pi_theta(y_i^t) - log pi_old(y_i^t) on response tokens, 0 on padding."""
    return valid(log_prob, response_mask) - valid(old_log_prob, response_mask)


def ratio_metrics(delta: torch.Tensor, response_mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """``ppo_kl`` = mean(-Delta) (verl's estimate of KL(pi_old || pi_theta)), and the ratio's mean and max.

    The max is per micro-batch; verl averages metrics over micro-batches.
    """
    with torch.no_grad():
        ratio = torch.exp(delta)
        mask = response_mask.bool()
        ratio_max = torch.where(mask, ratio, torch.zeros_like(ratio)).max() if mask.any() else ratio.new_zeros(())
        return {
            "ppo_kl": masked_mean(-delta, response_mask),
            "ratio_mean": masked_mean(ratio, response_mask),
            "ratio_max": ratio_max,
        }


def clip_fraction_metrics(
    mask: torch.Tensor, advantages: torch.Tensor, response_mask: torch.Tensor, split_by_sign: bool
) -> dict[str, torch.Tensor]:
    """Fraction of response tokens whose gradient the mask removed (tokens with A = 0 carry none anyway).

    ``pg_clipfrac`` counts every masked-out token with A != 0; with ``split_by_sign`` the parts with
    A > 0 (``pg_clipfrac_positive``) and A < 0 (``pg_clipfrac_negative``) are reported too; they sum
    to ``pg_clipfrac``. Token-level masks and sequence masks (shape (batch, 1)) both work.
    """
    with torch.no_grad():
        removed = (mask.expand_as(advantages) == 0).to(torch.float32)
        metrics = {"pg_clipfrac": masked_mean(removed * (advantages != 0), response_mask)}
        if split_by_sign:
            metrics["pg_clipfrac_positive"] = masked_mean(removed * (advantages > 0), response_mask)
            metrics["pg_clipfrac_negative"] = masked_mean(removed * (advantages < 0), response_mask)
        return metrics


def sequence_values(token_values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """A per-response quantity stored on every token (such as A_i) as a (batch, 1) tensor."""
    return sequence_sum(token_values, response_mask) / response_lengths(response_mask)


def nonempty_rows(response_mask: torch.Tensor) -> torch.Tensor:
    return response_mask.sum(dim=-1) > 0


def sequence_mean(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Mean over responses with at least one token of a (batch, 1) per-response quantity."""
    rows = nonempty_rows(response_mask)
    if not rows.any():
        return values.new_zeros(())
    return values.squeeze(-1)[rows].mean()


def sequence_max(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    rows = nonempty_rows(response_mask)
    if not rows.any():
        return values.new_zeros(())
    return values.squeeze(-1)[rows].max()
