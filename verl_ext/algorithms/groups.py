"""The groups of the advantage estimators: a group is the K responses to one prompt.

``index`` holds the group id of each response (the prompt's uid, an array of hashables); ``values`` one number per
response, shape (batch,).
"""

from __future__ import annotations

from verl_ext.algorithms.lazy_torch import torch


def group_ids(index) -> torch.Tensor:
    """Map each response's group id (any hashable) to 0..G-1, in order of first appearance."""
    import numpy as np  # here, not at the top: the launcher imports this package without numpy

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
