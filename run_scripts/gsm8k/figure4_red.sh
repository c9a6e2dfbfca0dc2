#!/usr/bin/env bash
# REC paper, Figure 4: RED-Drop and RED-Weight (T=1) against REC-OneSide-NoIS (0.6, 2.0) on GSM8k,
# Qwen2.5-1.5B-Instruct, on-policy and off-policy. The paper does not name its off-policy setting here;
# we use sync_interval=20 as in Figure 2 (SETTINGS=... to change it).
#
# Runs every cell of the grid below, one after the other (restrict it with ALGORITHMS=..., SETTINGS=...
# or LEARNING_RATES=...). Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1,
# VERL_EXT_CPU_SMOKE=1 (docs/run-scripts.md). Plot: verl-ext plot outputs/metrics/gsm8k-figure4
VERL_EXT_SCRIPT="run_scripts/gsm8k/figure4_red.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
verl_ext_figure gsm8k-figure4 gsm8k-qwen2.5-1.5b \
  "red_drop red_weight rec_oneside_nois@0.6_2.0" \
  "on_policy sync_interval_20" \
  "" "$@"
