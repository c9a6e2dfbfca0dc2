#!/usr/bin/env bash
# REC paper, Figure 3: the REC family on ToolACE (5k single-turn subset) with Llama-3.2-3B-Instruct.
# The paper does not list this figure's settings; we use Figure 2's off-policy ones, sync_interval=20 and
# sync_offset=10 (SETTINGS=... to change them). No evaluation accuracy (Table 1: N/A).
#
# Runs every cell of its grid (verl_ext/experiments/catalogue.py), one after the other; restrict it with
# ALGORITHMS=..., SETTINGS=... or LEARNING_RATES=... (the names: verl-ext experiments list).
# Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1 (check every config, no GPU),
# VERL_EXT_CPU_SMOKE=1 (2 real steps per run on the CPU), VERL_EXT_GPU_SMOKE=1; variables: docs/run-scripts.md.
# Same as: python -m verl_ext.experiments figure toolace-figure3 [overrides...]
# Plot: verl-ext plot outputs/metrics/toolace-figure3
exec "${PYTHON:-python}" -m verl_ext.experiments figure toolace-figure3 "$@"
