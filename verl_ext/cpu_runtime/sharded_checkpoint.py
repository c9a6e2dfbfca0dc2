"""The actor's weights in verl's sharded FSDP checkpoint, put back together: what the trainer held at a step.

verl's ``FSDPCheckpointManager`` writes one ``model_world_size_{W}_rank_{r}.pt`` per trainer rank into
``global_step_{g}/actor/``: each a state dict of DTensors holding that rank's shard (FSDP2 shards every
parameter along dim 0; ``fsdp_config.json`` records the world size). :func:`full_actor_weights` loads the W
files on this process's CPU (no process group needed) and concatenates each parameter's local shards in rank
order along its sharded dimension. Its :func:`~verl_ext.cpu_runtime.weight_checksum.weight_checksum` is then the
checksum a rollout replica must report after a push of those weights: the actor-side reference the
distributed tests compare every replica's checksum with.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from verl_ext.cpu_runtime.weight_checksum import weight_checksum


def checkpoint_world_size(actor_dir: Path) -> int:
    config = json.loads((Path(actor_dir) / "fsdp_config.json").read_text())
    return int(config["world_size"])


def full_actor_weights(actor_dir: str | Path) -> dict[str, torch.Tensor]:
    """Every parameter of the sharded actor checkpoint in ``actor_dir`` (``.../global_step_{g}/actor``), whole."""
    actor_dir = Path(actor_dir)
    world_size = checkpoint_world_size(actor_dir)
    shards = []
    for rank in range(world_size):
        path = actor_dir / f"model_world_size_{world_size}_rank_{rank}.pt"
        if not path.is_file():
            raise FileNotFoundError(f"{actor_dir}: no shard of rank {rank} of {world_size} ({path.name})")
        shards.append(torch.load(path, map_location="cpu", weights_only=False))
    names = list(shards[0])
    for rank, shard in enumerate(shards[1:], start=1):
        if list(shard) != names:
            raise ValueError(f"{actor_dir}: rank {rank}'s shard holds other parameters than rank 0's")
    return {name: _join([shard[name] for shard in shards]) for name in names}


def _join(pieces: list) -> torch.Tensor:
    first = pieces[0]
    if not hasattr(first, "to_local"):  # a plain tensor: every rank holds all of it
        return first.detach().clone()
    dims = [placement.dim for placement in first.placements if placement.is_shard()]
    if not dims:  # replicated
        return first.to_local().detach().clone()
    if len(dims) > 1:
        raise ValueError(f"a parameter sharded along several dimensions {dims}: not an FSDP2 checkpoint")
    joined = torch.cat([piece.to_local() for piece in pieces], dim=dims[0])
    if tuple(joined.shape) != tuple(first.shape):
        raise ValueError(f"shards join to {tuple(joined.shape)}, the parameter is {tuple(first.shape)}")
    return joined.detach().clone()


def actor_checkpoint_checksum(actor_dir: str | Path, dtype: torch.dtype = torch.float32) -> str:
    """The weight checksum of the checkpoint's actor, cast to the rollout's ``dtype``."""
    return weight_checksum({name: tensor.to(dtype) for name, tensor in full_actor_weights(actor_dir).items()})
