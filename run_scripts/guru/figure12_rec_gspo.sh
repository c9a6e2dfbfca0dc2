#!/usr/bin/env bash
# REC paper, Figure 12 (appendix B.7): REC-GSPO-IS and REC-GSPO-NoIS, epsilon (6e-4, 8e-4), sync_interval=8,
# on Guru-Math with Qwen3-30B-A3B (MoE). 30B parameters on one 8-GPU node need FSDP offloading (the profile
# turns it on); NNODES=2 or more is faster (docs/run-scripts.md, multi-node).
#
# Runs every cell of its grid (verl_ext/experiments/catalogue.py), one after the other; restrict it with
# ALGORITHMS=..., SETTINGS=... or LEARNING_RATES=... (the names: verl-ext experiments list).
# Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1 (check every config, no GPU),
# VERL_EXT_CPU_SMOKE=1 (2 real steps per run on the CPU), VERL_EXT_GPU_SMOKE=1; variables: docs/run-scripts.md.
# Same as: python -m verl_ext.experiments figure guru-figure12 [overrides...]
# Plot: verl-ext plot outputs/metrics/guru-figure12
exec "${PYTHON:-python}" -m verl_ext.experiments figure guru-figure12 "$@"
