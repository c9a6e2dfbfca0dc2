#!/usr/bin/env bash
# Off-policy GRPO (arXiv 2505.22257, eq. 6) on GSM8k with Qwen2.5-1.5B-Instruct: weights pushed to the rollout
# every v=10 steps (sync_interval_10) against v=1 (on_policy), one gradient step per batch (i=1), group size
# G=16 as in that paper; the other hyperparameters are the REC paper's GSM8k column (Table 1).
#
# Zero-variance masking is on in both runs, as in that paper: every group whose rewards are all equal leaves
# the step's batch, without new prompts (trainer.v1.delayed_sync.zero_variance_masking; run names end in -zvm;
# ZERO_VARIANCE_MASKING=0 turns it off). See docs/run-scripts.md and docs/staleness.md.
#
# Runs every cell of its grid (verl_ext/experiments/catalogue.py), one after the other; restrict it with
# SETTINGS=... (the names: verl-ext experiments list).
# Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1 (check every config, no GPU),
# VERL_EXT_CPU_SMOKE=1 (2 real steps per run on the CPU), VERL_EXT_GPU_SMOKE=1; variables: docs/run-scripts.md.
# Same as: python -m verl_ext.experiments figure gsm8k-offpolicy-grpo [overrides...]
# Plot: verl-ext plot outputs/metrics/gsm8k-offpolicy-grpo
exec "${PYTHON:-python}" -m verl_ext.experiments figure gsm8k-offpolicy-grpo "$@"
