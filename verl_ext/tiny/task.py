"""The synthetic verifiable task of the tiny assets: count from 1 to n.

Prompt: ``"count 3"`` (``n`` drawn uniformly from 1..:data:`MAX_COUNT`). Ground truth: ``"1 2 3"``.

Reward (graded, in [0, 1]): let ``p_1, p_2, ..., p_m`` be the digits of the response in order, whatever
surrounds them, ``t_1..t_n`` the ground truth, ``c`` the length of the longest common prefix of ``p``
and ``t``, and ``q`` the fraction of the response's non-space characters that are digits. Then

    counting = (c / n) * min(1, n / m)        (0 when the response has no digit)
    reward   = 0.8 * counting + 0.2 * q

so each correct next number earns ``0.8/n``, running past ``n`` is penalised in proportion, and answering
in digits only earns the last 0.2. Only the exact answer scores 1. The ``q`` term makes the reward differ
between almost any two responses of a randomly initialised model (a quarter of its vocabulary is digits),
so every group of samples has reward variance -- and every policy-gradient step a gradient -- from the
first step. A tiny model learns digits-only answers and the shared prefix ``1 2 ...`` within a few dozen
steps (mean reward about 0.03 -> 0.3 in 60 steps at learning rate 3e-3), and where to stop (which needs
reading ``n``) more slowly.
"""

from __future__ import annotations

import random
import re
from typing import Any

from verl_ext.data_sources import TINY_COUNT, TINY_LETTERS

ABILITY = "count"
INSTRUCTION = "count"
MAX_COUNT = 5
COUNTING_WEIGHT = 0.8
DIGIT = re.compile(r"\d")


def make_example(rng: random.Random, split: str, index: int) -> dict[str, Any]:
    """One row in verl's RL parquet format."""
    count = rng.randint(1, MAX_COUNT)
    return {
        "data_source": TINY_COUNT,
        "prompt": [{"role": "user", "content": f"{INSTRUCTION} {count}"}],
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": " ".join(str(i) for i in range(1, count + 1))},
        "extra_info": {"split": split, "index": index},
    }


def make_split(num_examples: int, split: str, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(f"{seed}-{split}")
    return [make_example(rng, split, index) for index in range(num_examples)]


def counting_score(response: str, ground_truth: str) -> float:
    """``(c / n) * min(1, n / m)``: correct-prefix fraction of the digits, shrunk when they overshoot."""
    target = ground_truth.split()
    if not target or any(not DIGIT.fullmatch(item) for item in target):
        raise ValueError(f"ground truth must be space-separated single digits, got {ground_truth!r}")
    produced = DIGIT.findall(response)
    if not produced:
        return 0.0
    prefix = 0
    for produced_digit, target_digit in zip(produced, target):
        if produced_digit != target_digit:
            break
        prefix += 1
    return (prefix / len(target)) * min(1.0, len(target) / len(produced))


def digit_fraction(response: str) -> float:
    """Fraction of the non-space characters that are digits (0 for an empty or all-space response)."""
    characters = [character for character in response if not character.isspace()]
    return sum(1 for character in characters if DIGIT.fullmatch(character)) / len(characters) if characters else 0.0


def count_reward(response: str, ground_truth: str) -> float:
    """``0.8 * counting_score + 0.2 * digit_fraction`` (see the module docstring)."""
    return COUNTING_WEIGHT * counting_score(response, ground_truth) + (1 - COUNTING_WEIGHT) * digit_fraction(response)


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None) -> dict[str, Any]:
    """verl's custom reward function of every tiny and scale asset's task
    (``reward.custom_reward_function.path=pkg://verl_ext.tiny.task``): the counting task, or the scale assets'
    letters task (:mod:`verl_ext.tiny.letters`), by ``data_source``."""
    if data_source == TINY_LETTERS:
        from verl_ext.tiny.letters import in_range_fraction

        score = in_range_fraction(solution_str, ground_truth)
        return {"score": score, "exact": float(score == 1.0)}
    if data_source != TINY_COUNT:
        raise ValueError(f"verl_ext.tiny.task.compute_score scores data_source {TINY_COUNT!r} or {TINY_LETTERS!r}, "
                         f"got {data_source!r}")
    counting = counting_score(solution_str, ground_truth)
    fraction = digit_fraction(solution_str)
    score = COUNTING_WEIGHT * counting + (1 - COUNTING_WEIGHT) * fraction
    return {"score": score, "counting": counting, "digit_fraction": fraction, "exact": float(counting == 1.0 and fraction == 1.0)}


ODD_COUNT_SCORE = 0.5


def compute_score_odd_constant(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None) -> dict[str, Any]:
    """The counting task's reward, except that every response to an odd "count n" prompt scores
    :data:`ODD_COUNT_SCORE`: those prompt groups have zero reward variance, a probe of zero-variance masking
    (``reward.custom_reward_function.name=compute_score_odd_constant``; the GPU plan's main run)."""
    result = compute_score(data_source, solution_str, ground_truth, extra_info)
    if data_source == TINY_COUNT and len(ground_truth.split()) % 2 == 1:
        return {**result, "score": ODD_COUNT_SCORE}
    return result
