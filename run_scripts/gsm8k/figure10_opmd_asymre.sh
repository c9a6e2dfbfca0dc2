#!/usr/bin/env bash
# REC paper, Figure 10 (appendix B.5): OPMD (beta=0.1) and AsymRE (beta=0.1) on GSM8k, Qwen2.5-1.5B-Instruct,
# in Figure 2's off-policy settings.
#
# Runs every cell of the grid below, one after the other (restrict it with ALGORITHMS=..., SETTINGS=...
# or LEARNING_RATES=...). Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1,
# VERL_EXT_CPU_SMOKE=1 (docs/run-scripts.md). Plot: verl-ext plot outputs/metrics/gsm8k-figure10
VERL_EXT_SCRIPT="run_scripts/gsm8k/figure10_opmd_asymre.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
verl_ext_figure gsm8k-figure10 gsm8k-qwen2.5-1.5b \
  "opmd asymre" \
  "sync_interval_20 sync_offset_10 offline" \
  "" "$@"
