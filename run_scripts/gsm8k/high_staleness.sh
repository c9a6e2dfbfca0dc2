#!/usr/bin/env bash
# Stale-data losses at high staleness (verl-ext's comparison, no paper figure): REC-OneSide-NoIS (arXiv 2509.24203),
# TOPR (arXiv 2503.14286), M2PO (arXiv 2510.01161, tau_M2 = 0.04) and GRPO on GSM8k, Qwen2.5-1.5B-Instruct, under
# sync_interval=64 (weights pushed every 64 steps; M2PO reports stable training on data 256 updates old) and offline.
#
# Runs every cell of its grid (verl_ext/experiments/catalogue.py), one after the other; restrict it with
# ALGORITHMS=..., SETTINGS=... or LEARNING_RATES=... (the names: verl-ext experiments list).
# Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1 (check every config, no GPU),
# VERL_EXT_CPU_SMOKE=1 (2 real steps per run on the CPU), VERL_EXT_GPU_SMOKE=1; variables: docs/run-scripts.md.
# Same as: python -m verl_ext.experiments figure gsm8k-high-staleness [overrides...]
# Plot: verl-ext plot outputs/metrics/gsm8k-high-staleness
exec "${PYTHON:-python}" -m verl_ext.experiments figure gsm8k-high-staleness "$@"
