"""Clipping masks of the REC family (arXiv 2509.24203), as pure tensor functions.

A mask M selects which tokens keep their gradient; a masked-out token contributes nothing. All inputs
broadcast: ``ratio`` is rho = pi_theta / pi_old per token, shape (batch, response_length), or a
sequence-level ratio s_i of shape (batch, 1); ``advantages`` has the same leading shape. Masks are
returned as float tensors without gradient (they are indicators).
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch


def one_side_mask(ratio: torch.Tensor, advantages: torch.Tensor, epsilon_low: float, epsilon_high: float) -> torch.Tensor:
    """Eq. (8): M = 1(A > 0, rho <= 1 + epsilon_high) + 1(A < 0, rho >= 1 - epsilon_low).

    Applied to the length-normalised sequence ratio s_i it is the sequence one-side mask of B.7.
    Tokens with A = 0 get M = 0 (they carry no gradient either way).
    """
    with torch.no_grad():
        keep_positive = (advantages > 0) & (ratio <= 1 + epsilon_high)
        keep_negative = (advantages < 0) & (ratio >= 1 - epsilon_low)
        return (keep_positive | keep_negative).to(ratio.dtype)


def two_side_mask(ratio: torch.Tensor, epsilon_low: float, epsilon_high: float) -> torch.Tensor:
    """Eq. (18): M = 1(1 - epsilon_low <= rho <= 1 + epsilon_high), whatever the sign of A."""
    with torch.no_grad():
        return ((ratio >= 1 - epsilon_low) & (ratio <= 1 + epsilon_high)).to(ratio.dtype)


def ring_mask(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    epsilon_low: float,
    epsilon_high: float,
    outer_epsilon_low: float,
    outer_epsilon_high: float,
) -> torch.Tensor:
    """Eqs. (19)-(21): the two-side band plus the outer rings

    M = 1(1 - epsilon_low <= rho <= 1 + epsilon_high)
      + 1(A > 0, rho <= 1 - epsilon'_low) + 1(A < 0, rho >= 1 + epsilon'_high),

    with epsilon'_low >= epsilon_low and epsilon'_high >= epsilon_high (the three sets are disjoint).
    """
    with torch.no_grad():
        inner = (ratio >= 1 - epsilon_low) & (ratio <= 1 + epsilon_high)
        outer_positive = (advantages > 0) & (ratio <= 1 - outer_epsilon_low)
        outer_negative = (advantages < 0) & (ratio >= 1 + outer_epsilon_high)
        return (inner | outer_positive | outer_negative).to(ratio.dtype)
