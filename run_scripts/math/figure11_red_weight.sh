#!/usr/bin/env bash
# REC paper, Figure 11 (appendix B.6): RED-Weight, REC-OneSide-NoIS and GRPO on MATH with Llama-3.1-8B-Instruct,
# evaluated on MATH-500 (temperature 0.6). The paper states neither the setting nor REC-OneSide-NoIS's epsilon;
# we use on-policy and (0.6, 2.0). Plot with --panels reward,eval,kl,entropy,response_length for its panels.
#
# Runs every cell of the grid below, one after the other (restrict it with ALGORITHMS=..., SETTINGS=...
# or LEARNING_RATES=...). Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1,
# VERL_EXT_CPU_SMOKE=1 (docs/run-scripts.md). Plot: verl-ext plot outputs/metrics/math-figure11
VERL_EXT_SCRIPT="run_scripts/math/figure11_red_weight.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
verl_ext_figure math-figure11 math-llama3.1-8b \
  "red_weight rec_oneside_nois@0.6_2.0 grpo" \
  "on_policy" \
  "" "$@"
