#!/usr/bin/env bash
# REC paper, Figure 9 (appendix B.4): GRPO (0.2, 0.2) and REC-OneSide-NoIS (0.6, 2.0) at learning rates
# 2e-6, 5e-6 and 1e-5 on GSM8k, Qwen2.5-1.5B-Instruct. The paper extends Figure 2 but does not name the
# setting of this plot; we use sync_interval=20 (SETTINGS=... to change it).
#
# Runs every cell of its grid (verl_ext/experiments/catalogue.py), one after the other; restrict it with
# ALGORITHMS=..., SETTINGS=... or LEARNING_RATES=... (the names: verl-ext experiments list).
# Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1 (check every config, no GPU),
# VERL_EXT_CPU_SMOKE=1 (2 real steps per run on the CPU), VERL_EXT_GPU_SMOKE=1; variables: docs/run-scripts.md.
# Same as: python -m verl_ext.experiments figure gsm8k-figure9 [overrides...]
# Plot: verl-ext plot outputs/metrics/gsm8k-figure9
exec "${PYTHON:-python}" -m verl_ext.experiments figure gsm8k-figure9 "$@"
