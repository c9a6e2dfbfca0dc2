#!/usr/bin/env bash
# REC paper, Figure 2: REINFORCE, GRPO and REC-OneSide-IS/NoIS at epsilon (0.2, 0.2) and (0.6, 2.0) on GSM8k,
# Qwen2.5-1.5B-Instruct, in the settings sync_interval=20, sync_offset=10 and offline (18 runs).
# The caption's "mixed" setting (sync_interval=16, sync_offset=8): SETTINGS=mixed bash run_scripts/gsm8k/figure2_rec_oneside.sh
#
# Runs every cell of the grid below, one after the other (restrict it with ALGORITHMS=..., SETTINGS=...
# or LEARNING_RATES=...). Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1,
# VERL_EXT_CPU_SMOKE=1 (docs/run-scripts.md). Plot: verl-ext plot outputs/metrics/gsm8k-figure2
VERL_EXT_SCRIPT="run_scripts/gsm8k/figure2_rec_oneside.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
verl_ext_figure gsm8k-figure2 gsm8k-qwen2.5-1.5b \
  "reinforce grpo rec_oneside_is rec_oneside_nois rec_oneside_is@0.6_2.0 rec_oneside_nois@0.6_2.0" \
  "sync_interval_20 sync_offset_10 offline" \
  "" "$@"
