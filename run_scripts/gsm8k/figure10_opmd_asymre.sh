#!/usr/bin/env bash
# REC paper, Figure 10 (appendix B.5): OPMD (beta=0.1) and AsymRE (beta=0.1) on GSM8k, Qwen2.5-1.5B-Instruct,
# in Figure 2's off-policy settings.
#
# Runs every cell of its grid (verl_ext/experiments/catalogue.py), one after the other; restrict it with
# ALGORITHMS=..., SETTINGS=... or LEARNING_RATES=... (the names: verl-ext experiments list).
# Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1 (check every config, no GPU),
# VERL_EXT_CPU_SMOKE=1 (2 real steps per run on the CPU), VERL_EXT_GPU_SMOKE=1; variables: docs/run-scripts.md.
# Same as: python -m verl_ext.experiments figure gsm8k-figure10 [overrides...]
# Plot: verl-ext plot outputs/metrics/gsm8k-figure10
exec "${PYTHON:-python}" -m verl_ext.experiments figure gsm8k-figure10 "$@"
