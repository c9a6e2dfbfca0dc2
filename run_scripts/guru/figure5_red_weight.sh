#!/usr/bin/env bash
# REC paper, Figure 5: RED-Weight (T=1) against GRPO on Guru-Math with Qwen2.5-7B-Instruct (Table 1: lr 1e-6,
# batch 64, K=16, weight decay 0.1, 80 warmup steps). The setting is not stated; we use on-policy.
#
# Runs every cell of its grid (verl_ext/experiments/catalogue.py), one after the other; restrict it with
# ALGORITHMS=..., SETTINGS=... or LEARNING_RATES=... (the names: verl-ext experiments list).
# Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1 (check every config, no GPU),
# VERL_EXT_CPU_SMOKE=1 (2 real steps per run on the CPU), VERL_EXT_GPU_SMOKE=1; variables: docs/run-scripts.md.
# Same as: python -m verl_ext.experiments figure guru-figure5 [overrides...]
# Plot: verl-ext plot outputs/metrics/guru-figure5
exec "${PYTHON:-python}" -m verl_ext.experiments figure guru-figure5 "$@"
