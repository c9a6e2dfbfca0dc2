"""Zero-variance masking (off-policy GRPO, arXiv 2505.22257): which prompt groups carry no learning signal.

A group is the K responses to one prompt, with rewards r_1..r_K (a response's reward is the sum of its
token-level reward scores, ``rm_scores``). A group is *zero-variance* when K >= 2 and

    r_1 = r_2 = ... = r_K        (exactly; all correct or all wrong for a verifiable reward)

Its group-relative advantages r_i - mean(r) are all 0, and GRPO's std-normalised ones are 0/0 (verl
returns 0): it adds nothing to the gradient, but its tokens would still count in the loss's token
normaliser, and the paper's improvement bound diverges as the group's reward variance goes to 0. Masking
removes such groups from the step's batch; the step trains on the others (no new prompts are drawn).

Pure functions only: the delayed_sync replay buffer reads the rewards and removes the groups.
"""

from collections.abc import Mapping, Sequence


def is_zero_variance(rewards: Sequence[float]) -> bool:
    """True when the group has at least two responses and all their rewards are exactly equal."""
    return len(rewards) >= 2 and min(rewards) == max(rewards)


def zero_variance_groups(rewards_by_group: Mapping[str, Sequence[float]]) -> set[str]:
    """The ids of the zero-variance groups among ``{group id: its responses' rewards}``."""
    return {group for group, rewards in rewards_by_group.items() if is_zero_variance(rewards)}
