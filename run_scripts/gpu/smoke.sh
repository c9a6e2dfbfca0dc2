#!/usr/bin/env bash
# A user's check on a GPU node: one real verl main_ppo run (FSDP2 actor + colocated vLLM, one GPU) under
# delayed_sync m=3 n=1 for 10 steps on the tiny GPU model, then a summary -- start-up, s/step, weight
# pushes against the schedule, lags, vLLM-vs-actor log-prob gap at lag 0, reward -- and a non-zero exit
# when a check fails. Without a CUDA GPU or vLLM it stops at once and says what is missing.
#
#   bash run_scripts/gpu/smoke.sh [--steps N] [--algorithm NAME] [--out DIR] [--quiet] [-- hydra overrides]
#
# Options: python -m verl_ext.gpu.smoke --help (also `verl-ext gpu-smoke`). Docs: docs/gpu.md.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# the GPU node may have only python3 (PYTHON overrides)
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
exec "$PYTHON" -m verl_ext.gpu.smoke "$@"
