#!/usr/bin/env bash
# A grid of runs, one after the other:
#   bash run_scripts/sweep.sh PROFILE --algorithms A,B,... [--settings S1,S2,...] [--learning-rates LR1,LR2,...]
#                             [--project NAME] [hydra overrides...]
# Names as in run_scripts/run.sh (verl-ext experiments list). Each run is named
# <algorithm>[-lr<lr>][-zvm]-<setting> in project NAME (default verl-ext-<profile>); EXPERIMENT_NAME, when set,
# prefixes every run's name. Settings default to on_policy.
# Example: bash run_scripts/sweep.sh gsm8k --algorithms grpo,rec_oneside_nois@0.6_2 --settings sync_interval_20 \
#            --learning-rates 2e-6,5e-6,1e-5
# Modes: VERL_EXT_DRY_RUN=1 checks every run in one Python process; VERL_EXT_CPU_SMOKE=1 runs each for 2 steps on
# CPU. CONTINUE_ON_ERROR=1 goes on after a failed run. Same as: python -m verl_ext.experiments sweep ...
exec "${PYTHON:-python}" -m verl_ext.experiments sweep "$@"
