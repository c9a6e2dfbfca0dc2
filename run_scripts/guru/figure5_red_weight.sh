#!/usr/bin/env bash
# REC paper, Figure 5: RED-Weight (T=1) against GRPO on Guru-Math with Qwen2.5-7B-Instruct (Table 1: lr 1e-6,
# batch 64, K=16, weight decay 0.1, 80 warmup steps). The setting is not stated; we use on-policy.
#
# Runs every cell of the grid below, one after the other (restrict it with ALGORITHMS=..., SETTINGS=...
# or LEARNING_RATES=...). Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1,
# VERL_EXT_CPU_SMOKE=1 (docs/run-scripts.md). Plot: verl-ext plot outputs/metrics/guru-figure5
VERL_EXT_SCRIPT="run_scripts/guru/figure5_red_weight.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
verl_ext_figure guru-figure5 guru-qwen2.5-7b \
  "red_weight grpo" \
  "on_policy" \
  "" "$@"
