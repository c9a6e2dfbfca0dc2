#!/usr/bin/env bash
# One run: bash run_scripts/run.sh PROFILE ALGORITHM[@EPS_LOW_EPS_HIGH] [SETTING] [hydra overrides...]
#
#   PROFILE    gsm8k-qwen2.5-1.5b (gsm8k), toolace-llama3.2-3b (toolace), guru-qwen2.5-7b, guru-qwen3-30b-a3b,
#              math-llama3.1-8b (math): a column of the REC paper's Table 1
#   ALGORITHM  reinforce, grpo, rec_oneside_is, rec_oneside_nois, rec_twoside_is, rec_twoside_nois, rec_ring_is,
#              rec_ring_nois, rec_gspo_is, rec_gspo_nois, opmd, asymre, red_drop, red_weight, offpolicy_grpo;
#              a clipped one takes its epsilons as NAME@LOW_HIGH, e.g. rec_oneside_nois@0.6_2.0
#   SETTING    on_policy (default), sync_interval_M, sync_offset_N, sync_interval_M_offset_N, mixed, offline
#
# Example: bash run_scripts/run.sh gsm8k rec_oneside_nois@0.6_2.0 sync_interval_20 trainer.total_training_steps=50
# Modes: VERL_EXT_DRY_RUN=1 (check the config, no GPU), VERL_EXT_CPU_SMOKE=1 (2 real steps on CPU).
# Environment variables and defaults: run_scripts/lib/common.sh, docs/run-scripts.md.
VERL_EXT_SCRIPT="run_scripts/run.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
verl_ext_run "$@"
