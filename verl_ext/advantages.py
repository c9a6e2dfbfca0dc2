"""Advantage estimators of the REC family (arXiv 2509.24203), as pure tensor functions.

Inputs: one scalar reward per response (``scores``, shape (batch,)) and the group id of each
response (``index``: the prompt's uid, an array of hashables; a group is the K responses to one prompt).
Outputs: one advantage per response, shape (batch,); verl's glue broadcasts it over the tokens.

    rec       A_i = r_i - mean_{j in group} r_j                         (group-relative REINFORCE, eq. 1)
    red_drop  in a group with more negatives (A < 0) than positives (A > 0), drop the excess
              negatives uniformly at random, S = the kept set; A_i = r_i - mean_{j in S} r_j for i in S,
              and A_i = 0 for a dropped response (eq. 10)

A group of one has A = 0 (its own reward is its baseline). GRPO (std-normalised) stays verl's ``grpo``.
"""

from dataclasses import dataclass

import numpy as np
import torch

# Rewards closer than this to the group mean count as neither positive nor negative.
SIGN_TOLERANCE = 1e-6


def group_ids(index) -> torch.Tensor:
    """Map each response's group id (any hashable) to 0..G-1, in order of first appearance."""
    index = np.asarray(index, dtype=object)
    first_seen: dict = {}
    return torch.tensor([first_seen.setdefault(uid, len(first_seen)) for uid in index], dtype=torch.long)


def group_mean(values: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Per response, the (weighted) mean of ``values`` over its group; 0 where the weights sum to 0."""
    weights = torch.ones_like(values) if weights is None else weights.to(values.dtype)
    number_of_groups = int(groups.max()) + 1 if groups.numel() else 0
    sums = torch.zeros(number_of_groups, dtype=values.dtype).index_add_(0, groups, values * weights)
    counts = torch.zeros(number_of_groups, dtype=values.dtype).index_add_(0, groups, weights)
    return (sums / counts.clamp_min(torch.finfo(values.dtype).tiny))[groups] * (counts[groups] > 0)


def rec_advantages(scores: torch.Tensor, index) -> torch.Tensor:
    """A_i = r_i - mean of the rewards in i's group."""
    return scores - group_mean(scores, group_ids(index))


@dataclass
class RedDropResult:
    advantages: torch.Tensor  # (batch,)
    kept: torch.Tensor  # (batch,) bool: the set S


def red_drop_advantages(scores: torch.Tensor, index, generator: torch.Generator) -> RedDropResult:
    """RED-Drop (eq. 10): balance each group by dropping its excess negatives at random, then re-centre."""
    groups = group_ids(index)
    centred = scores - group_mean(scores, groups)
    kept = torch.ones_like(scores, dtype=torch.bool)
    for group in range(int(groups.max()) + 1 if groups.numel() else 0):
        members = (groups == group).nonzero().squeeze(-1)
        negatives = members[centred[members] < -SIGN_TOLERANCE]
        positives = members[centred[members] > SIGN_TOLERANCE]
        excess = len(negatives) - len(positives)
        if excess > 0:
            order = torch.randperm(len(negatives), generator=generator)
            kept[negatives[order[:excess]]] = False
    advantages = (scores - group_mean(scores, groups, weights=kept)) * kept
    return RedDropResult(advantages=advantages, kept=kept)
