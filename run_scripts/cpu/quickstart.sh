#!/usr/bin/env bash
# verl-ext quickstart: verl's real training loop (python -m verl.trainer.main_ppo, v1 trainer, FSDP2
# actor, colocated rollout, weight sync) on this machine's CPU, with the recipe config and REC-OneSide-NoIS
# on a tiny Qwen2 model that learns to count. About 3-4 minutes on two cores; nothing is downloaded.
#
#   bash run_scripts/cpu/quickstart.sh [--steps N] [--algorithm NAME] [--out DIR] [-- overrides]
#
# Ends with a summary: reward at the start and the end, steps per second, start-up time, peak memory.
# Options: python -m verl_ext.cpu.quickstart --help. Docs: docs/cpu-backend.md.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ -f "$repo/run_scripts/lib/ensure_env.sh" ]; then
  # shellcheck source=run_scripts/lib/ensure_env.sh
  source "$repo/run_scripts/lib/ensure_env.sh"
fi
cd "$repo"
exec "${PYTHON:-python}" -m verl_ext.cpu.quickstart "$@"
