#!/usr/bin/env bash
# REC paper, Figure 8 (appendix B.3): REINFORCE, GRPO, REC-TwoSide-IS/NoIS and REC-Ring-NoIS, epsilon (0.2, 0.2),
# Ring's outer margins (0.6, 2.0), on GSM8k with Qwen2.5-1.5B-Instruct in Figure 2's three settings (15 runs).
#
# Runs every cell of the grid below, one after the other (restrict it with ALGORITHMS=..., SETTINGS=...
# or LEARNING_RATES=...). Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1,
# VERL_EXT_CPU_SMOKE=1 (docs/run-scripts.md). Plot: verl-ext plot outputs/metrics/gsm8k-figure8
VERL_EXT_SCRIPT="run_scripts/gsm8k/figure8_rec_variants.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
verl_ext_figure gsm8k-figure8 gsm8k-qwen2.5-1.5b \
  "reinforce grpo rec_twoside_is rec_twoside_nois rec_ring_nois" \
  "sync_interval_20 sync_offset_10 offline" \
  "" "$@"
