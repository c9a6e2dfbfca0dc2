#!/usr/bin/env bash
# Source this file to turn a verl-ext run into a CPU run (the issue's "profile"):
#
#   source run_scripts/cpu/profile.sh [trainer.n_gpus_per_node=2 ...]
#   python -m verl.trainer.main_ppo --config-path=recipe/rec/config --config-name=rec_trainer \
#       <the run's overrides> "${VERL_EXT_CPU_OVERRIDES[@]}"
#
# Arguments (optional) are the run's topology and batch keys (trainer.nnodes, trainer.n_gpus_per_node,
# data.train_batch_size, actor_rollout_ref.rollout.n, actor_rollout_ref.actor.ppo_mini_batch_size): the
# array is sized for them (logical Ray GPUs and CPUs, micro-batches per rank, agent-loop workers) and
# repeats the topology, so the user's keys win although the array comes last. World size 1 without them.
# trainer.nnodes > 1 needs a Ray cluster: run the command under
# `python -m verl_ext.cpu.local_cluster --nodes N --gpus-per-node G -- <command>`.
#
# It exports the environment of a CPU run (VERL_PLATFORM=cpu, offline Hugging Face, ...) and defines the
# array VERL_EXT_CPU_OVERRIDES: the tiny Qwen2 model and the counting task (verl_ext.tiny), the CPU
# rollout, FSDP2 over gloo in float32, and batch sizes and worker counts for two cores. Put the array
# after the run's own overrides so that it wins. `python -m verl_ext.cpu.profile` explains each entry;
# both this file and the Python launcher (verl_ext.cpu.backend) take the values from verl_ext/cpu/profile.py.
#
# Inputs: VERL_EXT_TINY_ASSETS (default <repo>/assets/tiny; build it with `python -m verl_ext.tiny.assets`)
#         PYTHON (default python).

_verl_ext_cpu_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
_verl_ext_cpu_assets="${VERL_EXT_TINY_ASSETS:-$_verl_ext_cpu_repo/assets/tiny}"
_verl_ext_cpu_profile="$("${PYTHON:-python}" -m verl_ext.cpu.profile --shell --assets "$_verl_ext_cpu_assets" -- "$@")" || {
  echo "[verl-ext] python -m verl_ext.cpu.profile failed (above; is verl-ext installed in ${PYTHON:-python}?)" >&2
  return 1 2>/dev/null || exit 1
}
eval "$_verl_ext_cpu_profile"
unset _verl_ext_cpu_repo _verl_ext_cpu_assets _verl_ext_cpu_profile
