#!/usr/bin/env bash
# REC paper, Figure 12 (appendix B.7): REC-GSPO-IS and REC-GSPO-NoIS, epsilon (6e-4, 8e-4), sync_interval=8,
# on Guru-Math with Qwen3-30B-A3B (MoE). 30B parameters on one 8-GPU node need FSDP offloading (the profile
# turns it on); NNODES=2 or more is faster (docs/run-scripts.md, multi-node).
#
# Runs every cell of the grid below, one after the other (restrict it with ALGORITHMS=..., SETTINGS=...
# or LEARNING_RATES=...). Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1,
# VERL_EXT_CPU_SMOKE=1 (docs/run-scripts.md). Plot: verl-ext plot outputs/metrics/guru-figure12
VERL_EXT_SCRIPT="run_scripts/guru/figure12_rec_gspo.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
verl_ext_figure guru-figure12 guru-qwen3-30b-a3b \
  "rec_gspo_is@6e-4_8e-4 rec_gspo_nois@6e-4_8e-4" \
  "sync_interval_8" \
  "" "$@"
