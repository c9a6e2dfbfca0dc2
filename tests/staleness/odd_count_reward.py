"""A reward for the CPU end-to-end test of zero-variance masking (reward.custom_reward_function.path=<this file>).

The counting task's reward (verl_ext.tiny.task) for prompts "count n" with n even; a constant 0.5 for every
response when n is odd, so each odd prompt's group has zero reward variance and masking must remove it.
"""

from verl_ext.tiny import task

CONSTANT = 0.5


def target_count(ground_truth: str) -> int:
    """n of the prompt "count n": its ground truth is "1 2 ... n"."""
    return len(ground_truth.split())


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    result = task.compute_score(data_source, solution_str, ground_truth, extra_info)
    if target_count(ground_truth) % 2 == 1:
        return {**result, "score": CONSTANT}
    return result
