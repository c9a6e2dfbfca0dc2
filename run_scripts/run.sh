#!/usr/bin/env bash
# One run: bash run_scripts/run.sh PROFILE ALGORITHM[@EPS_LOW_EPS_HIGH] [SETTING] [hydra overrides...]
#
#   PROFILE    gsm8k-qwen2.5-1.5b (gsm8k), toolace-llama3.2-3b (toolace), guru-qwen2.5-7b, guru-qwen3-30b-a3b,
#              math-llama3.1-8b (math): a column of the REC paper's Table 1
#   ALGORITHM  a registered loss (rec_reinforce, rec_oneside_is, ..., red_weight, offpolicy_grpo, topr, m2po),
#              red_drop or grpo (alias: reinforce = rec_reinforce); a clipped one takes its epsilons as
#              NAME@LOW_HIGH, e.g. rec_oneside_nois@0.6_2
#   SETTING    on_policy (default), sync_interval_M, sync_offset_N, sync_interval_M_offset_N, offline
#              (alias: mixed = sync_interval_16_offset_8)
#
# Every name: verl-ext experiments list. The run is named <algorithm>[-zvm]-<setting> (EXPERIMENT_NAME replaces it).
# Example: bash run_scripts/run.sh gsm8k rec_oneside_nois@0.6_2 sync_interval_20 trainer.total_training_steps=50
# Modes: VERL_EXT_DRY_RUN=1 (check the config, no GPU), VERL_EXT_CPU_SMOKE=1 (2 real steps on CPU).
# Environment variables: docs/run-scripts.md. Same as: python -m verl_ext.experiments run ...
exec "${PYTHON:-python}" -m verl_ext.experiments run "$@"
