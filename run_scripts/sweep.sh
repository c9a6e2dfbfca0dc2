#!/usr/bin/env bash
# A grid of runs, one after the other:
#   bash run_scripts/sweep.sh PROFILE --algorithms A,B,... --settings S1,S2,... [--learning-rates LR1,LR2,...]
#                             [--project NAME] [hydra overrides...]
# Names as in run_scripts/run.sh. Each cell is named <algorithm>[-lr<lr>]-<setting> in project NAME
# (default verl-ext-<profile>); EXPERIMENT_NAME, when set, prefixes every cell's name.
# Example: bash run_scripts/sweep.sh gsm8k --algorithms grpo,rec_oneside_nois@0.6_2.0 --settings sync_interval_20 \
#            --learning-rates 2e-6,5e-6,1e-5
# Modes: VERL_EXT_DRY_RUN=1 checks every cell in one Python process; VERL_EXT_CPU_SMOKE=1 runs every cell for
# 2 steps on CPU. CONTINUE_ON_ERROR=1 goes on after a failed run.
VERL_EXT_SCRIPT="run_scripts/sweep.sh" VERL_EXT_SCRIPT_ARGS="$*"
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

[ $# -ge 1 ] || verl_ext_die "usage: sweep.sh PROFILE --algorithms A,B --settings S1,S2 [--learning-rates LR1,LR2] [--project NAME] [overrides...]"
profile="$1"
shift
algorithms="" settings="" rates="" project=""
overrides=()
while [ $# -gt 0 ]; do
  case "$1" in
    --algorithms) algorithms="${2:-}"; shift 2 ;;
    --settings) settings="${2:-}"; shift 2 ;;
    --learning-rates) rates="${2:-}"; shift 2 ;;
    --project) project="${2:-}"; shift 2 ;;
    --*) verl_ext_die "sweep.sh: unknown option $1" ;;
    *) overrides+=("$1"); shift ;;
  esac
done
[ -n "$algorithms" ] || verl_ext_die "sweep.sh: --algorithms is required"
[ -n "$settings" ] || settings=on_policy
verl_ext_profile "$profile"
verl_ext_sweep "$profile" "$algorithms" "$settings" "$rates" "${project:-${PROJECT_NAME:-verl-ext-$PROFILE_NAME}}" "${overrides[@]}"
