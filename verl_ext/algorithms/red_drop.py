"""The ``red_drop`` estimator: RED-Drop (arXiv 2509.24203, eq. 10).

Input: one scalar reward per response (``scores``, shape (batch,)) and the group id of each response (``index``,
see :mod:`verl_ext.algorithms.groups`). Output: one advantage per response, shape (batch,).

In a group with more negatives (r_i - mean_j r_j < 0) than positives (> 0), drop the excess negatives uniformly at
random; S = the kept set. Then

    A_i = r_i - mean_{j in S} r_j    for i in S,        A_i = 0    for a dropped response

A group of one has A = 0. The drops are drawn from one generator per seed (``algorithm.red_drop_seed``, default 1)
per process, so a run draws the same drops every time. The fraction of the batch dropped is logged as
``red_drop/dropped_fraction`` (through :mod:`verl_ext.algorithms.step_metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass

from verl_ext import metric_names
from verl_ext.algorithms.groups import group_ids, group_mean
from verl_ext.algorithms.lazy_torch import torch
from verl_ext.algorithms.registry import REC, Estimate, estimator

# Rewards closer than this to the group mean count as neither positive nor negative.
SIGN_TOLERANCE = 1e-6
RED_DROP_SEED = "algorithm.red_drop_seed"
# verl's v1 trainer pads a batch to whole mini-batches with zero-loss rows whose group id starts with this
# (verl/trainer/ppo/padding_utils.py); they are not responses, so they stay out of the dropped fraction.
VERL_PADDING_UID_PREFIX = "pad"


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


_red_drop_generators: dict[int, torch.Generator] = {}


def red_drop_generator(seed: int) -> torch.Generator:
    """One generator per seed per process, seeded once: the run draws the same drops every time."""
    if seed not in _red_drop_generators:
        _red_drop_generators[seed] = torch.Generator().manual_seed(seed)
    return _red_drop_generators[seed]


def red_drop_seed(config) -> int:
    seed = config.get("red_drop_seed", None) if config is not None else None
    return 1 if seed is None else int(seed)


@estimator("red_drop", "RED-Drop: balanced dropping of excess negatives, re-centred on the kept set", f"{REC}, eq. 10",
           keys=(RED_DROP_SEED,), drops_responses=True)
def red_drop_estimate(scores, index, config) -> Estimate:
    result = red_drop_advantages(scores, index, red_drop_generator(red_drop_seed(config)))
    real = torch.tensor([not str(uid).startswith(VERL_PADDING_UID_PREFIX) for uid in index], dtype=torch.bool)
    dropped = (~result.kept)[real].to(torch.float32)
    return Estimate(result.advantages, {metric_names.RED_DROP_DROPPED_FRACTION: dropped.mean().item() if dropped.numel() else 0.0})
