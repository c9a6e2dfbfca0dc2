"""Tiny offline assets for CPU runs: a small Qwen2 model, its tokenizer, and a verifiable counting task.

Built deterministically by ``python -m verl_ext.tiny.assets --out DIR`` (:mod:`verl_ext.tiny.assets`);
nothing is downloaded. The reward function is :func:`verl_ext.tiny.task.compute_score`.
"""
