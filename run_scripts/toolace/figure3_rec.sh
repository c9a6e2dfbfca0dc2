#!/usr/bin/env bash
# REC paper, Figure 3: the REC family on ToolACE (5k single-turn subset) with Llama-3.2-3B-Instruct.
# The paper does not list this figure's settings; we use Figure 2's off-policy ones, sync_interval=20 and
# sync_offset=10 (SETTINGS=... to change them). No evaluation accuracy (Table 1: N/A).
#
# Runs every cell of the grid below, one after the other (restrict it with ALGORITHMS=..., SETTINGS=...
# or LEARNING_RATES=...). Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1,
# VERL_EXT_CPU_SMOKE=1 (docs/run-scripts.md). Plot: verl-ext plot outputs/metrics/toolace-figure3
VERL_EXT_SCRIPT="run_scripts/toolace/figure3_rec.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
verl_ext_figure toolace-figure3 toolace-llama3.2-3b \
  "reinforce grpo rec_oneside_is rec_oneside_nois rec_oneside_nois@0.6_2.0 rec_twoside_nois rec_ring_nois" \
  "sync_interval_20 sync_offset_10" \
  "" "$@"
