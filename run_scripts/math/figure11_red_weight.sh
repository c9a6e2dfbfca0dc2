#!/usr/bin/env bash
# REC paper, Figure 11 (appendix B.6): RED-Weight, REC-OneSide-NoIS and GRPO on MATH with Llama-3.1-8B-Instruct,
# evaluated on MATH-500 (temperature 0.6). The paper states neither the setting nor REC-OneSide-NoIS's epsilon;
# we use on-policy and (0.6, 2.0). Plot with --panels reward,eval,kl,entropy,response_length for its panels.
#
# Runs every cell of its grid (verl_ext/experiments/catalogue.py), one after the other; restrict it with
# ALGORITHMS=..., SETTINGS=... or LEARNING_RATES=... (the names: verl-ext experiments list).
# Extra arguments are Hydra overrides for every run. Modes: VERL_EXT_DRY_RUN=1 (check every config, no GPU),
# VERL_EXT_CPU_SMOKE=1 (2 real steps per run on the CPU), VERL_EXT_GPU_SMOKE=1; variables: docs/run-scripts.md.
# Same as: python -m verl_ext.experiments figure math-figure11 [overrides...]
# Plot: verl-ext plot outputs/metrics/math-figure11
exec "${PYTHON:-python}" -m verl_ext.experiments figure math-figure11 "$@"
