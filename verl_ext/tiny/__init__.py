"""Tiny offline assets for CPU and GPU runs: a small Qwen2 model, its tokenizer, and a verifiable counting task.

Built deterministically by ``python -m verl_ext.tiny.assets --out DIR`` (:mod:`verl_ext.tiny.assets`;
``--size gpu``: head_dim 64, for vLLM);
nothing is downloaded. The reward function is :func:`verl_ext.tiny.task.compute_score`.
"""
