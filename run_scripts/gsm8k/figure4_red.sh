#!/usr/bin/env bash
# REC paper, Figure 4: RED-Drop and RED-Weight (T=1) against REC-OneSide-NoIS (0.6, 2.0) on GSM8k,
# Qwen2.5-1.5B-Instruct, on-policy and off-policy. The paper does not name its off-policy setting here;
# we use sync_interval=20 as in Figure 2 (SETTINGS=... to change it).
#
# Runs every cell of its grid (verl_ext/experiments/catalogue.py), one after the other; restrict it with
# ALGORITHMS=..., SETTINGS=... or LEARNING_RATES=... (the names: verl-ext experiments list).
# Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1 (check every config, no GPU),
# VERL_EXT_CPU_SMOKE=1 (2 real steps per run on the CPU), VERL_EXT_GPU_SMOKE=1; variables: docs/run-scripts.md.
# Same as: python -m verl_ext.experiments figure gsm8k-figure4 [overrides...]
# Plot: verl-ext plot outputs/metrics/gsm8k-figure4
exec "${PYTHON:-python}" -m verl_ext.experiments figure gsm8k-figure4 "$@"
