#!/usr/bin/env bash
# Off-policy GRPO (arXiv 2505.22257, eq. 6) on GSM8k with Qwen2.5-1.5B-Instruct: weights pushed to the rollout
# every v=10 steps (sync_interval_10) against v=1 (on_policy), one gradient step per batch (i=1), group size
# G=16 as in that paper; the other hyperparameters are the REC paper's GSM8k column (Table 1).
#
# Zero-variance masking is on in both runs, as in that paper: every group whose rewards are all equal leaves
# the step's batch, without new prompts (trainer.v1.delayed_sync.zero_variance_masking; run names end in -zvm;
# ZERO_VARIANCE_MASKING=0 turns it off). See docs/run-scripts.md and docs/staleness.md.
#
# Restrict the grid with SETTINGS=...; extra arguments are Hydra overrides for every run. Modes:
# VERL_EXT_DRY_RUN=1, VERL_EXT_CPU_SMOKE=1 (docs/run-scripts.md). Plot: verl-ext plot outputs/metrics/gsm8k-offpolicy-grpo
VERL_EXT_SCRIPT="run_scripts/gsm8k/offpolicy_grpo.sh" VERL_EXT_SCRIPT_ARGS="$*"
: "${ZERO_VARIANCE_MASKING:=1}"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
verl_ext_figure gsm8k-offpolicy-grpo gsm8k-qwen2.5-1.5b \
  "offpolicy_grpo" \
  "on_policy sync_interval_10" \
  "" actor_rollout_ref.rollout.n=16 "$@"
