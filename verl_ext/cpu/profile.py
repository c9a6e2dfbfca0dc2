"""The CPU profile: environment variables and Hydra overrides that turn any verl-ext run into a CPU run.

Appended after a run's own overrides, they swap in the tiny model and the counting task
(:mod:`verl_ext.tiny`), select the CPU platform and rollout (:mod:`verl_ext.cpu`), and size everything
for two cores. Each entry says why it is there. The shell form (``run_scripts/cpu/profile.sh``) is
generated from this module, so the Python launcher and the shell scripts cannot drift apart:

    eval "$(python -m verl_ext.cpu.profile --shell --assets DIR [-- trainer.n_gpus_per_node=2 ...])"

The topology is the user's: ``trainer.nnodes`` and ``trainer.n_gpus_per_node`` as a GPU user writes them
(given to :func:`cpu_overrides` as a :class:`~verl_ext.cpu_runtime.topology.Topology`, or read from the user's
overrides by :func:`cpu_overrides_for`); the logical GPUs and CPUs of Ray, the micro-batches per rank and
the agent-loop workers follow from it (:mod:`verl_ext.cpu_runtime.topology`). A world size of 1 is the default.

Importing this module does not import verl.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Iterable, Optional, Sequence

from verl_ext.checks.arguments import split_at_double_dash
from verl_ext.cpu.ray_loopback import LOOPBACK_REASON, LOOPBACK_VARIABLE
from verl_ext.cpu_runtime.loopback_store import INIT_METHOD, INIT_METHOD_REASON, INIT_METHOD_VARIABLE
from verl_ext.cpu_runtime.topology import (
    MINI_BATCH_SIZE,
    ROLLOUT_N,
    TRAIN_BATCH_SIZE,
    Topology,
    derived_sizes,
    ray_init_overrides,
)
from verl_ext.overrides import override_value
from verl_ext.seeding import SEEDED_AGENT_LOOP
from verl_ext.tiny.assets import OFFLINE_RUN_ENVIRONMENT, TASK_OVERRIDE_REASONS
from verl_ext.verl_warnings import python_warnings

TRANSFER_QUEUE_THREADS = 8  # TransferQueue's own default for TQ_NUM_THREADS


def physical_cores() -> int:
    """This machine's physical cores, as TransferQueue counts them (psutil; the logical count when psutil cannot tell)."""
    import psutil

    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


# Why each environment variable is set (PYTHONWARNINGS: see cpu_environment, which keeps the user's own entries).
ENVIRONMENT_REASONS = {
    "VERL_PLATFORM": ("cpu", "select verl_ext's cpu platform (never auto-detected)"),
    "VERL_ENGINE_DEVICE": ("cuda", "pick verl's FSDP engine classes, registered for cuda/npu only; they run on CPU tensors"),
    "TQ_NUM_THREADS": (str(min(TRANSFER_QUEUE_THREADS, physical_cores())),
                       "TransferQueue's torch threads in each put and get, at most this machine's physical cores (its "
                       "default, 8, logs a warning at every put and get on a machine with fewer: ~120 lines per step)"),
    "PYTHONWARNINGS": (python_warnings(), "hide the warnings verl's imports print, in every Ray worker, about optional "
                       "engines a CPU run does not use (torchtitan, VeOmni, Megatron's Apex, ...; verl_ext.verl_warnings)"),
    "VERL_DATAPROTO_SERIALIZATION_METHOD": ("numpy", "verl's agent loop sends every response to a reward worker as a "
                                            "DataProto; pickled with its tensors as raw bytes (verl's 'numpy' method) "
                                            "instead of torch.save: 0.06 instead of 0.43 ms of CPU per response "
                                            "(0.07 instead of 0.24 ms to unpickle), on the critical path of generation"),
    LOOPBACK_VARIABLE: ("0", LOOPBACK_REASON),
    INIT_METHOD_VARIABLE: (INIT_METHOD, INIT_METHOD_REASON),
    **OFFLINE_RUN_ENVIRONMENT,
}

# Why each override is there (key -> reason); values are filled in by cpu_overrides().
OVERRIDE_REASONS = {
    "trainer.device": "verl's device string",
    "trainer.nnodes": "Ray nodes (the user's; more than one: a local cluster, verl_ext.cpu.local_cluster)",
    "trainer.n_gpus_per_node": "trainer ranks per node (the user's; 1 by default), one logical Ray GPU each",
    "+ray_kwargs.ray_init.address": "one node: always a new Ray (never a cluster started elsewhere on this machine); "
    "several: the local cluster's address (VERL_EXT_CPU_RAY_ADDRESS)",
    "ray_kwargs.ray_init.num_cpus": "logical CPUs for Ray scheduling (oversubscribed: each worker bundle asks for 3); "
    "null when joining a cluster",
    "+ray_kwargs.ray_init.num_gpus": "logical GPUs: verl's resource pools place workers only on GPU/NPU resources "
    "(one node only: a cluster's nodes have their own)",
    "+ray_kwargs.ray_init.include_dashboard": "no dashboard web server and its agents for a one-node Ray (about 3 CPU-s "
    "and 10 processes fewer at each start; nothing reads it; the local cluster's nodes start without one too)",
    "actor_rollout_ref.model.path": "the tiny Qwen2 model",
    "actor_rollout_ref.model.use_remove_padding": "padding removal needs flash-attn's varlen kernels",
    "+actor_rollout_ref.model.override_config.attn_implementation": "torch SDPA instead of flash-attn",
    "actor_rollout_ref.actor.strategy": "FSDP2 (fully_shard) over gloo, one rank per logical GPU",
    "actor_rollout_ref.actor.fsdp_config.use_torch_compile": "skip torch.compile of the entropy kernel (slow start-up on CPU)",
    "+actor_rollout_ref.actor.fsdp_config.mixed_precision": "compute in float32, as the rollout does: rollout and actor log-probs agree to ~1e-6",
    "actor_rollout_ref.actor.optim.lr": "a learning rate for a 125K-parameter model (verl's default 1e-6 is for billions)",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "one optimizer step per training step",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "each rank's share of the mini-batch in one forward pass",
    "actor_rollout_ref.actor.use_dynamic_bsz": "fixed micro-batches",
    "actor_rollout_ref.ref.fsdp_config.use_torch_compile": "as for the actor",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": "each rank's share of the batch in one forward pass",
    "actor_rollout_ref.rollout.name": "verl_ext's transformers rollout",
    "actor_rollout_ref.rollout.dtype": "float32, as the actor computes",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "one process per rollout replica (one replica per trainer rank)",
    "actor_rollout_ref.rollout.n": "responses per prompt (group size)",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": "each rank's share of the batch in one forward pass",
    "actor_rollout_ref.rollout.agent.num_workers": "one agent-loop worker process per trainer rank (verl splits each "
    "batch over them)",
    "actor_rollout_ref.rollout.agent.default_agent_loop": "each request its own sampling seed: a run is a function of its seeds",
    "actor_rollout_ref.rollout.calculate_log_probs": "the rollout returns per-token log-probs (pi_old in bypass mode)",
    "reward.custom_reward_function.path": "the counting task's reward",
    "reward.custom_reward_function.name": "the counting task's reward",
    "data.train_files": "the counting task",
    "data.val_files": "the counting task",
    **TASK_OVERRIDE_REASONS,
}

DEFAULTS = {
    "train_batch_size": 8,
    "rollout_n": 4,
    "max_prompt_length": 16,
    "max_response_length": 12,
    "learning_rate": 3e-3,
}


def cpu_environment() -> dict[str, str]:
    """Environment variables of a CPU run (set before starting Ray; Ray workers inherit them). ``PYTHONWARNINGS`` keeps
    the entries this process's own value has (:func:`verl_ext.verl_warnings.python_warnings`)."""
    environment = {name: value for name, (value, _reason) in ENVIRONMENT_REASONS.items()}
    environment["PYTHONWARNINGS"] = python_warnings(os.environ.get("PYTHONWARNINGS"))
    return environment


def cpu_overrides(
    assets_dir: str | Path,
    train_batch_size: int = DEFAULTS["train_batch_size"],
    rollout_n: int = DEFAULTS["rollout_n"],
    learning_rate: float = DEFAULTS["learning_rate"],
    topology: Topology = Topology(),
    mini_batch_size: Optional[int] = None,
) -> list[str]:
    """Hydra overrides of a CPU run on the tiny assets in ``assets_dir``, for ``topology``'s trainer ranks.

    ``mini_batch_size`` (default ``train_batch_size``: one optimizer step per training step) sizes the actor's
    micro-batches; a world size that does not divide the responses of a mini-batch or of a step raises
    :class:`verl_ext.config_values.ConfigError` naming the keys.
    """
    assets = Path(assets_dir).resolve()
    mini_batch_size = train_batch_size if mini_batch_size is None else mini_batch_size
    sizes = derived_sizes(topology, train_batch_size, rollout_n, mini_batch_size)
    ray_init = dict(override.split("=", 1) for override in ray_init_overrides(topology))
    values = {
        "trainer.device": "cpu",
        "trainer.nnodes": topology.nnodes,
        "trainer.n_gpus_per_node": topology.n_gpus_per_node,
        **ray_init,
        "actor_rollout_ref.model.path": assets / "model",
        "actor_rollout_ref.model.use_remove_padding": False,
        "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
        "actor_rollout_ref.actor.strategy": "fsdp2",
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile": False,
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision": "{param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}",
        "actor_rollout_ref.actor.optim.lr": learning_rate,
        "actor_rollout_ref.actor.ppo_mini_batch_size": mini_batch_size,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": sizes.actor_micro_batch_per_rank,
        "actor_rollout_ref.actor.use_dynamic_bsz": False,
        "actor_rollout_ref.ref.fsdp_config.use_torch_compile": False,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": sizes.log_prob_micro_batch_per_rank,
        "actor_rollout_ref.rollout.name": "cpu",
        "actor_rollout_ref.rollout.dtype": "float32",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.rollout.n": rollout_n,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": sizes.log_prob_micro_batch_per_rank,
        "actor_rollout_ref.rollout.agent.num_workers": sizes.agent_loop_workers,
        "actor_rollout_ref.rollout.agent.default_agent_loop": SEEDED_AGENT_LOOP,
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        "reward.num_workers": 1,
        "reward.custom_reward_function.path": "pkg://verl_ext.tiny.task",
        "reward.custom_reward_function.name": "compute_score",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
        "data.train_files": assets / "data" / "train.parquet",
        "data.val_files": assets / "data" / "val.parquet",
        "data.train_batch_size": train_batch_size,
        "data.max_prompt_length": DEFAULTS["max_prompt_length"],
        "data.max_response_length": DEFAULTS["max_response_length"],
        "data.dataloader_num_workers": 0,
        "trainer.logger": "[console,file]",
    }
    unexplained = set(values) - set(OVERRIDE_REASONS)
    one_node_only = {"+ray_kwargs.ray_init.num_gpus", "+ray_kwargs.ray_init.include_dashboard"}
    unset = set(OVERRIDE_REASONS) - set(values) - (one_node_only if topology.nnodes > 1 else set())
    if unexplained or unset:
        raise AssertionError(f"every CPU override needs a reason and a value: {sorted(unexplained | unset)}")
    return [f"{key}={_hydra_value(value)}" for key, value in values.items()]


def cpu_overrides_for(assets_dir: str | Path, user_overrides: Iterable[str] = ()) -> list[str]:
    """:func:`cpu_overrides` sized for the user's own overrides: their topology and, when they set them, their
    prompts per step, group size and mini-batch (so that the derived micro-batches fit what they run).

    Put the user's overrides after the result (``merge_overrides(cpu_overrides_for(a, user), ..., user)``): a
    key the user sets still wins, and what the profile derives agrees with it.
    """
    user_overrides = list(user_overrides)

    def number(key: str, default: Optional[int]) -> Optional[int]:
        value = override_value(user_overrides, key)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            from verl_ext.config_values import reject

            reject(key, value, "an integer >= 1")

    train_batch_size = number(TRAIN_BATCH_SIZE, DEFAULTS["train_batch_size"])
    return cpu_overrides(
        assets_dir,
        train_batch_size=train_batch_size,
        rollout_n=number(ROLLOUT_N, DEFAULTS["rollout_n"]),
        topology=Topology.from_overrides(user_overrides),
        mini_batch_size=number(MINI_BATCH_SIZE, train_batch_size),
    )


def _hydra_value(value: object) -> str:
    if isinstance(value, Path):  # any folder name, non-ASCII or with quotes, read back by Hydra as it is
        from verl_ext.overrides import hydra_string

        return hydra_string(str(value))
    return str(value)


def shell_profile(assets_dir: str | Path, user_overrides: Sequence[str] = ()) -> str:
    """Bash code exporting the environment and the array ``VERL_EXT_CPU_OVERRIDES`` (sized for the topology and
    batch sizes in ``user_overrides``, see :func:`cpu_overrides_for`)."""
    lines = [f"export {name}={shlex.quote(value)}" for name, value in cpu_environment().items()]
    overrides = " ".join(shlex.quote(override) for override in cpu_overrides_for(assets_dir, user_overrides))
    lines.append(f"VERL_EXT_CPU_OVERRIDES=({overrides})")
    lines.append(f"export VERL_EXT_TINY_ASSETS={shlex.quote(str(Path(assets_dir).resolve()))}")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv, user = split_at_double_dash(argv)
    parser = argparse.ArgumentParser(
        prog="python -m verl_ext.cpu.profile [options] [-- the run's overrides]", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--assets", type=Path, default=None, help="tiny assets directory (default: verl_ext.tiny.assets.default_assets_dir())")
    parser.add_argument("--shell", action="store_true", help="print bash code to eval (default: explain each entry)")
    args = parser.parse_args(argv)
    from verl_ext.config_values import ConfigError
    from verl_ext.tiny.assets import default_assets_dir

    assets = args.assets or default_assets_dir()
    try:
        overrides = cpu_overrides_for(assets, user)
    except ConfigError as error:
        print(f"python -m verl_ext.cpu.profile: {error}", file=sys.stderr)
        return 2
    if args.shell:
        sys.stdout.write(shell_profile(assets, user))
        return 0
    for name, value in cpu_environment().items():
        print(f"{name}={value}\n    {ENVIRONMENT_REASONS[name][1]}")
    for override in overrides:
        print(f"{override}\n    {OVERRIDE_REASONS[override.split('=', 1)[0]]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
