#!/usr/bin/env bash
# REC paper, Figure 9 (appendix B.4): GRPO (0.2, 0.2) and REC-OneSide-NoIS (0.6, 2.0) at learning rates
# 2e-6, 5e-6 and 1e-5 on GSM8k, Qwen2.5-1.5B-Instruct. The paper extends Figure 2 but does not name the
# setting of this plot; we use sync_interval=20 (SETTINGS=... to change it).
#
# Runs every cell of the grid below, one after the other (restrict it with ALGORITHMS=..., SETTINGS=...
# or LEARNING_RATES=...). Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1,
# VERL_EXT_CPU_SMOKE=1 (docs/run-scripts.md). Plot: verl-ext plot outputs/metrics/gsm8k-figure9
VERL_EXT_SCRIPT="run_scripts/gsm8k/figure9_learning_rates.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
verl_ext_figure gsm8k-figure9 gsm8k-qwen2.5-1.5b \
  "grpo rec_oneside_nois@0.6_2.0" \
  "sync_interval_20" \
  "2e-6 5e-6 1e-5" "$@"
