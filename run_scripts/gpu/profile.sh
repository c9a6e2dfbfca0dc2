#!/usr/bin/env bash
# Source this file to turn a verl-ext run into a run on one GPU with vLLM (the CPU profile's twin):
#
#   source run_scripts/gpu/profile.sh
#   python -m verl.trainer.main_ppo --config-path=recipe/rec/config --config-name=rec_trainer \
#       <the run's overrides> "${VERL_EXT_GPU_OVERRIDES[@]}"          # a whole small run on the tiny model
#
# It exports the environment of a GPU run (offline Hugging Face, no wandb, ...) and defines two arrays:
#   VERL_EXT_GPU_OVERRIDES        one GPU, the tiny GPU model (head_dim 64) and the counting task, vLLM in
#                                 bf16 with enforce_eager and a memory fraction that leaves the actor room
#   VERL_EXT_GPU_SMOKE_OVERRIDES  what VERL_EXT_GPU_SMOKE=1 appends to a run script's own overrides: the
#                                 model and the data, and what one GPU or the offline kit needs changed
# Put an array after the run's own overrides so that it wins. `python -m verl_ext.gpu.profile` explains
# each entry; this file and the Python launcher (verl_ext.gpu.backend) take them from verl_ext/gpu/profile.py.
#
# Inputs: VERL_EXT_TINY_GPU_ASSETS (default <repo>/assets/tiny-gpu; build it with
#         `python -m verl_ext.tiny.assets --size gpu`), PYTHON (default python).

_verl_ext_gpu_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
_verl_ext_gpu_assets="${VERL_EXT_TINY_GPU_ASSETS:-$_verl_ext_gpu_repo/assets/tiny-gpu}"
_verl_ext_gpu_profile="$("${PYTHON:-python}" -m verl_ext.gpu.profile --shell --assets "$_verl_ext_gpu_assets")" || {
  echo "[verl-ext] python -m verl_ext.gpu.profile failed: is verl-ext installed in ${PYTHON:-python}?" >&2
  return 1 2>/dev/null || exit 1
}
eval "$_verl_ext_gpu_profile"
unset _verl_ext_gpu_repo _verl_ext_gpu_assets _verl_ext_gpu_profile
