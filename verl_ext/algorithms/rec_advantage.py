"""The ``rec`` estimator: group-relative REINFORCE advantages (arXiv 2509.24203, eq. 1).

Input: one scalar reward per response (``scores``, shape (batch,)) and the group id of each response (``index``,
see :mod:`verl_ext.algorithms.groups`). Output: one advantage per response, shape (batch,); the verl glue
broadcasts it over the tokens.

    A_i = r_i - mean_{j in group(i)} r_j

A group of one has A = 0 (its own reward is its baseline). GRPO (std-normalised) stays verl's ``grpo``.
"""

from __future__ import annotations

from verl_ext.algorithms.groups import group_ids, group_mean
from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.registry import REC, Estimate, estimator


def rec_advantages(scores: torch.Tensor, index) -> torch.Tensor:
    """A_i = r_i - mean of the rewards in i's group."""
    return scores - group_mean(scores, group_ids(index))


@estimator("rec", "group-relative REINFORCE: A_i = r_i - mean_j r_j", f"{REC}, eq. 1")
def rec_estimate(scores, index, config) -> Estimate:
    return Estimate(rec_advantages(scores, index))
