"""The scale assets' task: write letters from a range, for as long as the run lets the policy write.

Prompt: ``"letters d-k"`` (a range of 5 to 13 lowercase letters, drawn per row). Ground truth: ``"d-k"``.

Reward (graded, in [0, 1]): the fraction of the response's ASCII letters that lie in the range (0 when it has
none). Nothing ends a good answer early: with ``actor_rollout_ref.rollout.ignore_eos=true`` every response is
``data.max_response_length`` tokens long (1,024 and more), which is what the scale runs measure. A randomly
initialised model over :func:`verl_ext.tiny.tokenizer.build_synthetic_tokenizer`'s vocabulary (almost every token
is letters) scores about the range's share of the alphabet, differently for every response, so every group has
reward variance -- and every policy-gradient step a gradient -- from the first step; a policy that writes only
letters of the range scores 1.
"""

from __future__ import annotations

import random
import string
from typing import Any

from verl_ext.data_sources import TINY_LETTERS

ABILITY = "letters"
INSTRUCTION = "letters"
MIN_WIDTH, MAX_WIDTH = 5, 13


def make_example(rng: random.Random, split: str, index: int) -> dict[str, Any]:
    """One row in verl's RL parquet format."""
    width = rng.randint(MIN_WIDTH, MAX_WIDTH)
    first = rng.randrange(0, 26 - width + 1)
    letter_range = f"{string.ascii_lowercase[first]}-{string.ascii_lowercase[first + width - 1]}"
    return {
        "data_source": TINY_LETTERS,
        "prompt": [{"role": "user", "content": f"{INSTRUCTION} {letter_range}"}],
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": letter_range},
        "extra_info": {"split": split, "index": index},
    }


def make_split(num_examples: int, split: str, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(f"{seed}-{split}-letters")
    return [make_example(rng, split, index) for index in range(num_examples)]


def in_range_fraction(response: str, ground_truth: str) -> float:
    """The fraction of ``response``'s ASCII letters (either case) inside ``ground_truth``'s range ``"a-z"``."""
    first, dash, last = ground_truth.partition("-")
    if not (dash and len(first) == len(last) == 1 and "a" <= first <= last <= "z"):
        raise ValueError(f"ground truth must be a letter range like 'd-k', got {ground_truth!r}")
    letters = [character for character in response.lower() if character in string.ascii_lowercase]
    return sum(first <= letter <= last for letter in letters) / len(letters) if letters else 0.0
