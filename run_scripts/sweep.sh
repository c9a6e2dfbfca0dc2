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

usage="usage: sweep.sh PROFILE --algorithms A,B --settings S1,S2 [--learning-rates LR1,LR2] [--project NAME] [overrides...]"
[ $# -ge 1 ] || verl_ext_die "$usage"
profile="$1"
shift
algorithms="" settings="" rates="" project=""
overrides=()
# Every branch shifts at least once, so the loop ends; an option without its value is an error.
while [ $# -gt 0 ]; do
  option="$1" value=""
  case "$option" in
    --algorithms=*|--settings=*|--learning-rates=*|--project=*) value="${option#*=}" option="${option%%=*}"; shift ;;
    --algorithms|--settings|--learning-rates|--project)
      case "${2-}" in
        ''|-*) verl_ext_die "sweep.sh: option $option needs a value. $usage" ;;
      esac
      value="$2"
      shift 2
      ;;
    --*) verl_ext_die "sweep.sh: unknown option $option (allowed: --algorithms, --settings, --learning-rates, --project)" ;;
    *) overrides+=("$option"); shift; continue ;;
  esac
  [ -n "$value" ] || verl_ext_die "sweep.sh: option $option needs a value. $usage"
  case "$option" in
    --algorithms) algorithms="$value" ;;
    --settings) settings="$value" ;;
    --learning-rates) rates="$value" ;;
    --project) project="$value" ;;
  esac
done
[ -n "$algorithms" ] || verl_ext_die "sweep.sh: --algorithms is required"
[ -n "$settings" ] || settings=on_policy
verl_ext_profile "$profile"
verl_ext_sweep "$profile" "$algorithms" "$settings" "$rates" "${project:-${PROJECT_NAME:-verl-ext-$PROFILE_NAME}}" "${overrides[@]}"
