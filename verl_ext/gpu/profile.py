"""The GPU profile: environment variables and Hydra overrides of a verl-ext run on one GPU with vLLM.

The twin of :mod:`verl_ext.cpu.profile`, in two strengths, each override with its reason:

- :func:`gpu_overrides` -- a whole small run (the smoke command, ``tests/gpu``, ``benchmarks/bench_gpu.py``):
  one node and one GPU, the tiny GPU model (``python -m verl_ext.tiny.assets --size gpu``: head_dim 64)
  and the counting task, a colocated vLLM rollout in bf16 with a memory fraction that leaves the FSDP2
  actor room, ``enforce_eager`` (no CUDA-graph capture: start-up matters more than generation speed for
  a model this small), batch sizes for the tiny task, Ray without its dashboard.
- :func:`gpu_smoke_overrides` -- ``VERL_EXT_GPU_SMOKE=1 bash run_scripts/<dataset>/<figure>.sh``: the
  script's own GPU settings stay (dynamic batch sizes, memory fraction, offloading, checkpoint engine,
  logging, batch sizes, lengths); only the model and the data are swapped, plus the few settings that
  must change for one GPU or for the offline GPU kit (``../shared/gpu-kit``), each saying why.

The shell form (``run_scripts/gpu/profile.sh``) is generated from this module, so the Python launcher and
the run scripts cannot drift apart:

    eval "$(python -m verl_ext.gpu.profile --shell --assets DIR)"
    # exports the environment, VERL_EXT_GPU_OVERRIDES=(...) and VERL_EXT_GPU_SMOKE_OVERRIDES=(...)

Importing this module imports neither verl nor torch (nor :mod:`verl_ext.cpu`, whose package imports torch:
the run scripts call it once per script). Nothing here has run on a GPU in this checkout's
history unless docs/gpu.md says so.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Optional, Sequence

from verl_ext.tiny.assets import OFFLINE_RUN_ENVIRONMENT, TASK_OVERRIDE_REASONS

__all__ = ["gpu_environment", "gpu_overrides", "gpu_smoke_overrides", "shell_profile"]

# Why each environment variable is set (the GPU kit's env.sh sets the same ones).
ENVIRONMENT_REASONS = {
    **OFFLINE_RUN_ENVIRONMENT,
    "PYTHONUNBUFFERED": ("1", "stream the workers' output as it happens"),
}

# Settings the GPU smoke of a run script must change, whatever the script: key -> reason.
SMOKE_OVERRIDE_REASONS = {
    "actor_rollout_ref.model.path": "model swapped: the tiny GPU Qwen2 (head_dim 64), built offline",
    "data.train_files": "data swapped: the counting task",
    "data.val_files": "data swapped: the counting task",
    "reward.custom_reward_function.path": "the counting task's reward (the script's reward scores its own dataset)",
    "reward.custom_reward_function.name": "the counting task's reward",
    "trainer.nnodes": "one node",
    "trainer.n_gpus_per_node": "one GPU (the scripts ask for 8)",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "one GPU: the guru and math profiles shard vLLM over 2 or 4",
    "actor_rollout_ref.model.use_remove_padding": "padding removal needs flash-attn's varlen kernels; the kit carries no flash-attn",
    "+actor_rollout_ref.model.override_config.attn_implementation": "verl's default is flash_attention_2 (flash-attn, not in the kit): torch SDPA",
    "+ray_kwargs.ray_init.include_dashboard": "the kit leaves out the dashboard's web build; Ray would wait 60 s for it",
}

# Further settings of a whole small run on the tiny model (gpu_overrides): key -> reason.
RUN_OVERRIDE_REASONS = {
    "trainer.device": "verl's device string",
    "actor_rollout_ref.actor.strategy": "FSDP2 (fully_shard), world size 1",
    "actor_rollout_ref.actor.optim.lr": "a learning rate for a 2M-parameter model (verl's default 1e-6 is for billions)",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "one optimizer step per training step",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "whole mini-batch in one forward pass",
    "actor_rollout_ref.actor.use_dynamic_bsz": "fixed micro-batches (the tiny task's sequences are all short)",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": "whole batch in one forward pass",
    "actor_rollout_ref.rollout.name": "verl's vLLM rollout server",
    "actor_rollout_ref.rollout.dtype": "vLLM in bf16, as the FSDP actor computes (verl's mixed precision)",
    "actor_rollout_ref.rollout.gpu_memory_utilization": "vLLM's share of the GPU: leaves the colocated actor room on a 24 GB card too",
    "actor_rollout_ref.rollout.enforce_eager": "no CUDA-graph capture or compilation in vLLM: start-up matters, not generation speed",
    "actor_rollout_ref.rollout.n": "responses per prompt (group size)",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": "whole batch in one forward pass",
    "actor_rollout_ref.rollout.agent.num_workers": "one agent-loop worker process (each one imports verl: start-up)",
    "actor_rollout_ref.rollout.calculate_log_probs": "vLLM returns per-token log-probs (pi_old in bypass mode)",
    **TASK_OVERRIDE_REASONS,
}

DEFAULTS = {
    "train_batch_size": 16,
    "rollout_n": 4,
    "max_prompt_length": 16,
    "max_response_length": 12,
    "learning_rate": 1e-3,
    "gpu_memory_utilization": 0.3,
}


def gpu_environment() -> dict[str, str]:
    """Environment variables of a GPU run (set before Ray starts; Ray workers inherit them)."""
    return {name: value for name, (value, _reason) in ENVIRONMENT_REASONS.items()}


def _tiny_gpu_assets(assets_dir: str | Path) -> Path:
    return Path(assets_dir).resolve()


def gpu_smoke_overrides(assets_dir: str | Path) -> list[str]:
    """What ``VERL_EXT_GPU_SMOKE=1`` appends after a run script's overrides (see :data:`SMOKE_OVERRIDE_REASONS`)."""
    assets = _tiny_gpu_assets(assets_dir)
    values = {
        "actor_rollout_ref.model.path": assets / "model",
        "data.train_files": assets / "data" / "train.parquet",
        "data.val_files": assets / "data" / "val.parquet",
        "reward.custom_reward_function.path": "pkg://verl_ext.tiny.task",
        "reward.custom_reward_function.name": "compute_score",
        "trainer.nnodes": 1,
        "trainer.n_gpus_per_node": 1,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.model.use_remove_padding": False,
        "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
        "+ray_kwargs.ray_init.include_dashboard": False,
    }
    return _checked("GPU smoke", values, SMOKE_OVERRIDE_REASONS)


def gpu_overrides(
    assets_dir: str | Path,
    train_batch_size: int = DEFAULTS["train_batch_size"],
    rollout_n: int = DEFAULTS["rollout_n"],
    learning_rate: float = DEFAULTS["learning_rate"],
) -> list[str]:
    """Hydra overrides of a small run on one GPU, the tiny GPU assets in ``assets_dir`` (``--size gpu``)."""
    responses = train_batch_size * rollout_n
    values = {
        "trainer.device": "cuda",
        "actor_rollout_ref.actor.strategy": "fsdp2",
        "actor_rollout_ref.actor.optim.lr": learning_rate,
        "actor_rollout_ref.actor.ppo_mini_batch_size": train_batch_size,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": responses,
        "actor_rollout_ref.actor.use_dynamic_bsz": False,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": responses,
        "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.dtype": "bfloat16",
        "actor_rollout_ref.rollout.gpu_memory_utilization": DEFAULTS["gpu_memory_utilization"],
        "actor_rollout_ref.rollout.enforce_eager": True,
        "actor_rollout_ref.rollout.n": rollout_n,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": responses,
        "actor_rollout_ref.rollout.agent.num_workers": 1,
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        "reward.num_workers": 1,
        "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
        "data.train_batch_size": train_batch_size,
        "data.max_prompt_length": DEFAULTS["max_prompt_length"],
        "data.max_response_length": DEFAULTS["max_response_length"],
        "data.dataloader_num_workers": 0,
        "trainer.logger": "[console,file]",
    }
    # the two sets name different keys (checked by tests): the smoke set first, then the rest
    return gpu_smoke_overrides(assets_dir) + _checked("GPU run", values, RUN_OVERRIDE_REASONS)


# A run on the scale assets (``verl-ext tiny-assets --size qwen2.5-0.5b``, or ``scale-cpu`` on the CPU backend):
# what it sets over its backend's small-run profile, key -> reason. bench_gpu.py's modes run with these.
SCALE_OVERRIDE_REASONS = {
    "data.max_prompt_length": "the letters task's chat prompt (about 20 tokens) with room",
    "data.max_response_length": "the response length the run measures (1,024 and more on a GPU)",
    "data.train_batch_size": "prompts per step",
    "actor_rollout_ref.rollout.n": "responses per prompt",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "one optimizer step per training step (the papers' setting)",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "responses per forward pass: long responses, a 151,936-id output layer",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": "as the actor's",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": "as the actor's",
    "actor_rollout_ref.actor.optim.lr": "a learning rate for hundreds of millions of parameters (verl's default)",
}
# vLLM's keys of a scale run on a GPU (the CPU rollout has none of them)
SCALE_GPU_OVERRIDE_REASONS = {
    "actor_rollout_ref.rollout.ignore_eos": "every response runs to data.max_response_length: the work is the same in every mode",
    "actor_rollout_ref.rollout.gpu_memory_utilization": "vLLM's share: the KV cache of 64 responses of 1,024+ tokens, "
                                                        "and room for the resident engine beside the actor (overlap)",
}
SCALE_DEFAULTS = {"train_batch_size": 16, "rollout_n": 4, "micro_batch": 8, "learning_rate": 1e-6,
                  "gpu_memory_utilization": 0.4, "max_prompt_length": 32}


def scale_overrides(backend: str, response_length: int, train_batch_size: int = SCALE_DEFAULTS["train_batch_size"],
                    rollout_n: int = SCALE_DEFAULTS["rollout_n"]) -> list[str]:
    """Overrides of a run on the scale assets, over ``backend``'s (``gpu`` or ``cpu``) small-run profile; on a GPU
    vLLM ignores the end-of-sequence token, so every response is ``response_length`` tokens long."""
    micro = min(SCALE_DEFAULTS["micro_batch"], train_batch_size * rollout_n)
    values = {
        "data.max_prompt_length": SCALE_DEFAULTS["max_prompt_length"],
        "data.max_response_length": response_length,
        "data.train_batch_size": train_batch_size,
        "actor_rollout_ref.rollout.n": rollout_n,
        "actor_rollout_ref.actor.ppo_mini_batch_size": train_batch_size,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.actor.optim.lr": SCALE_DEFAULTS["learning_rate"],
    }
    overrides = _checked("scale run", values, SCALE_OVERRIDE_REASONS)
    if backend == "gpu":
        overrides += _checked("scale GPU run", {
            "actor_rollout_ref.rollout.ignore_eos": True,
            "actor_rollout_ref.rollout.gpu_memory_utilization": SCALE_DEFAULTS["gpu_memory_utilization"],
        }, SCALE_GPU_OVERRIDE_REASONS)
    elif backend != "cpu":
        raise ValueError(f"backend {backend!r}; allowed: gpu, cpu")
    return overrides


def override_reason(override: str) -> str:
    """Why the profile sets ``override`` (``key=value``, ``+key=value``)."""
    key = override.split("=", 1)[0]
    for reasons in (SMOKE_OVERRIDE_REASONS, RUN_OVERRIDE_REASONS, SCALE_OVERRIDE_REASONS, SCALE_GPU_OVERRIDE_REASONS):
        if key in reasons:
            return reasons[key]
    raise KeyError(f"{override!r} is not an override of the GPU profile")


def _checked(what: str, values: dict, reasons: dict) -> list[str]:
    unexplained = set(values) ^ set(reasons)
    if unexplained:
        raise AssertionError(f"every {what} override needs a reason and a value: {sorted(unexplained)}")
    from verl_ext.overrides import hydra_string  # a path is written so that Hydra reads it back as it is

    return [f"{key}={hydra_string(str(value)) if isinstance(value, Path) else value}" for key, value in values.items()]


def shell_profile(assets_dir: str | Path) -> str:
    """Bash code exporting the environment and the arrays ``VERL_EXT_GPU_OVERRIDES`` (a whole small run)
    and ``VERL_EXT_GPU_SMOKE_OVERRIDES`` (what a run script's GPU smoke swaps)."""
    lines = [f"export {name}={shlex.quote(value)}" for name, value in gpu_environment().items()]
    for array, overrides in (
        ("VERL_EXT_GPU_OVERRIDES", gpu_overrides(assets_dir)),
        ("VERL_EXT_GPU_SMOKE_OVERRIDES", gpu_smoke_overrides(assets_dir)),
    ):
        lines.append(f"{array}=({' '.join(shlex.quote(override) for override in overrides)})")
    lines.append(f"export VERL_EXT_TINY_GPU_ASSETS={shlex.quote(str(_tiny_gpu_assets(assets_dir)))}")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.gpu.profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--assets", type=Path, default=None,
                        help="tiny GPU assets directory (default: verl_ext.tiny.assets.default_assets_dir('gpu'))")
    parser.add_argument("--shell", action="store_true", help="print bash code to eval (default: explain each entry)")
    args = parser.parse_args(argv)
    from verl_ext.tiny.assets import default_assets_dir

    assets = args.assets or default_assets_dir("gpu")
    if args.shell:
        sys.stdout.write(shell_profile(assets))
        return 0
    for name, (value, reason) in ENVIRONMENT_REASONS.items():
        print(f"{name}={value}\n    {reason}")
    print("\n# VERL_EXT_GPU_SMOKE=1 of a run script: only these change")
    for override in gpu_smoke_overrides(assets):
        print(f"{override}\n    {override_reason(override)}")
    print("\n# a whole small run (smoke command, tests/gpu, bench_gpu.py): the above, and")
    smoke = set(gpu_smoke_overrides(assets))
    for override in gpu_overrides(assets):
        if override not in smoke:
            print(f"{override}\n    {override_reason(override)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
