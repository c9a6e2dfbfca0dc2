"""The ``data_source`` values of verl-ext's datasets: the one place each is written.

verl copies a row's ``data_source`` column to the reward function, which picks its scorer by it, and names
validation metrics after it (``val-core/<data_source>/...``). So the preprocessors (:mod:`data_prep`) that
write a value and the reward router (:func:`verl_ext.rewards.compute_score`) that dispatches on it must agree
letter for letter; both import the constants below. The values are those of the Hugging Face datasets the
rows come from and must not change: parquet files prepared earlier carry them.

This module imports nothing (the reward workers and the preprocessors both load it).
"""

from __future__ import annotations

# Written by data_prep/gsm8k.py; scored by verl_ext.rewards.gsm8k.
GSM8K = "openai/gsm8k"

# Written by data_prep/math.py (train and test splits); scored by verl_ext.rewards.math.
MATH_LIGHTEVAL = "DigitalLearningGmbH/MATH-lighteval"
# Written by data_prep/math.py (math500.parquet, kept apart for per-source validation metrics);
# scored by verl_ext.rewards.math.
MATH_500 = "HuggingFaceH4/MATH-500"
# Written by no preprocessor here: the MATH dataset's former hub name, which files prepared with other tools
# (verl's own examples) carry; scored by verl_ext.rewards.math.
MATH_LEGACY = "lighteval/MATH"

# Guru-Math rows keep their own data_source (``math__deepscaler_preview``, ...): data_prep/guru.py keeps the rows
# whose data_source starts with this prefix, and verl_ext.rewards.math scores them reading the text after
# the last ``</think>``.
GURU_MATH_PREFIX = "math"

# Written by data_prep/toolace.py; scored by verl_ext.rewards.toolace.
TOOLACE = "Team-ACE/ToolACE"

# Written by verl_ext.tiny.task (the CPU lab's counting task); scored by verl_ext.tiny.task.compute_score,
# not by verl_ext.rewards.
TINY_COUNT = "verl_ext/tiny_count"
# Written by verl_ext.tiny.letters (the scale assets' task: long responses); scored by verl_ext.tiny.task.compute_score.
TINY_LETTERS = "verl_ext/tiny_letters"

GSM8K_SOURCES = (GSM8K,)
MATH_SOURCES = (MATH_LIGHTEVAL, MATH_500, MATH_LEGACY)
TOOLACE_SOURCES = (TOOLACE,)


def is_guru_math(data_source: str) -> bool:
    """A Guru-Math row's source: starts with :data:`GURU_MATH_PREFIX` and is not one of the MATH sources."""
    return data_source not in MATH_SOURCES and data_source.startswith(GURU_MATH_PREFIX)


def reward_sources_text() -> str:
    """The data_source values :func:`verl_ext.rewards.compute_score` scores, for an error message."""
    names = ", ".join(repr(name) for name in (*GSM8K_SOURCES, *MATH_SOURCES, *TOOLACE_SOURCES))
    return f"{names}, or any data_source starting with {GURU_MATH_PREFIX!r} (Guru-Math)"
