#!/usr/bin/env bash
# REC paper, Figure 2: REINFORCE, GRPO and REC-OneSide-IS/NoIS at epsilon (0.2, 0.2) and (0.6, 2.0) on GSM8k,
# Qwen2.5-1.5B-Instruct, in the settings sync_interval=20, sync_offset=10 and offline (18 runs).
# The caption's "mixed" setting (sync_interval=16, sync_offset=8): SETTINGS=mixed bash run_scripts/gsm8k/figure2_rec_oneside.sh
#
# Runs every cell of its grid (verl_ext/experiments/catalogue.py), one after the other; restrict it with
# ALGORITHMS=..., SETTINGS=... or LEARNING_RATES=... (the names: verl-ext experiments list).
# Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1 (check every config, no GPU),
# VERL_EXT_CPU_SMOKE=1 (2 real steps per run on the CPU), VERL_EXT_GPU_SMOKE=1; variables: docs/run-scripts.md.
# Same as: python -m verl_ext.experiments figure gsm8k-figure2 [overrides...]
# Plot: verl-ext plot outputs/metrics/gsm8k-figure2
exec "${PYTHON:-python}" -m verl_ext.experiments figure gsm8k-figure2 "$@"
