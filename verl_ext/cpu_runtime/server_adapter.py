"""The trainer-side handle of the CPU rollout: verl's ``BaseRollout`` for rollout name ``cpu``.

verl builds one inside each actor worker (``ActorRolloutRefWorker.init_model``) and, for standalone or
colocated replicas, inside each ``CheckpointEngineWorker``. The checkpoint engine's ``update_weights``
hands it a stream of ``(name, tensor)`` pairs; it forwards them to its replica's
:class:`verl_ext.cpu_runtime.rollout_server.CPURolloutServer` in buckets of at most
``checkpoint_engine.update_weights_bucket_megabytes``, as verl's vLLM adapter streams buckets over
CUDA IPC. With no shared device memory on a CPU the tensors travel through Ray's object store, cast to the
rollout dtype; the adapter checksums what it sends and the server refuses a push whose received checksum
differs. LoRA (``model.lora_rank > 0``, ``lora.merge=false``): verl's colocated push sends the adapter's tensors
with its ``peft_config`` (and once the base weights, ``base_sync_done=False``); they go to the server the same way,
which loads them into LoRA layers of that config (:mod:`verl_ext.cpu_runtime.lora`). A stream that breaks part-way (a checkpoint engine whose peer died) makes the server drop the
half-loaded weights (``abort_weight_update``): it refuses to generate until a complete push. ``resume`` and
``release`` map to the server's ``wake_up`` and ``sleep`` exactly when verl's vLLM adapter does (only with
``free_cache_engine``).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Generator, Optional

import ray
import torch

from verl_ext.cpu_runtime.weight_checksum import combine_digests, tensor_digest

logger = logging.getLogger(__name__)

SERVER_NAME_PREFIX = "verl_ext_cpu_"


def server_actor_name(replica_rank: int, node_rank: int = 0, role: str = "", name_suffix: str = "") -> str:
    """Ray actor name of a replica's server (``role`` is ``""``, ``"reward_"`` or ``"teacher_"``)."""
    return f"{SERVER_NAME_PREFIX}server_{role}{replica_rank}_{node_rank}{name_suffix}"


def rollout_world_size(config: Any) -> int:
    return (
        int(config.tensor_model_parallel_size)
        * int(config.data_parallel_size)
        * int(config.pipeline_model_parallel_size)
    )


def require_single_rank_replicas(config: Any) -> None:
    """The CPU rollout runs one process per replica: every parallel size must be 1."""
    sizes = {
        "actor_rollout_ref.rollout.tensor_model_parallel_size": config.tensor_model_parallel_size,
        "actor_rollout_ref.rollout.data_parallel_size": config.data_parallel_size,
        "actor_rollout_ref.rollout.pipeline_model_parallel_size": config.pipeline_model_parallel_size,
    }
    wrong = {key: value for key, value in sizes.items() if int(value) != 1}
    if wrong:
        raise ValueError(f"the CPU rollout supports one rank per replica; set to 1: {wrong}")


def _base_rollout() -> type:
    from verl.workers.rollout.base import BaseRollout

    return BaseRollout


class CPUServerAdapter(_base_rollout()):
    """Forwards verl's rollout control calls and weight pushes to this rank's CPU rollout server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any = None, replica_rank: int = -1):
        super().__init__(config, model_config, device_mesh)
        require_single_rank_replicas(self.config)
        rank = int(os.environ.get("RANK", "0"))
        self.replica_rank = rank if replica_rank == -1 else replica_rank
        self.rollout_rank = 0
        self.is_leader_rank = True
        self.server_handle: Optional[ray.actor.ActorHandle] = None
        from verl_ext.cpu_runtime.rollout_server import _torch_dtype

        self.dtype = _torch_dtype(self.config.dtype)
        self.last_push: Optional[dict[str, Any]] = None

    def _server(self) -> ray.actor.ActorHandle:
        if self.server_handle is None:
            self.server_handle = ray.get_actor(server_actor_name(self.replica_rank))
        return self.server_handle

    async def resume(self, tags: list[str]):
        if self.config.free_cache_engine:
            await self._server().wake_up.remote(tags=tags)

    async def release(self):
        if self.config.free_cache_engine:
            await self._server().sleep.remote()

    @torch.no_grad()
    async def update_weights(
        self,
        weights: Generator[tuple[str, torch.Tensor], None, None],
        global_steps: Optional[int] = None,
        wire_format: str = "named_tensors",
        peft_config: Any = None,
        base_sync_done: bool = True,
        **kwargs: Any,
    ):
        from verl.workers.rollout.utils import ensure_async_iterator

        if wire_format != "named_tensors":
            raise NotImplementedError(f"CPU rollout takes full weights (wire_format='named_tensors'), not {wire_format!r}")
        # verl's LoRA adapter mode: the adapter's tensors (base_sync_done=True) or, once, the base weights
        adapter = peft_config is not None and bool(base_sync_done)
        start = time.perf_counter()
        server = self._server()
        bucket_limit = int(self.config.checkpoint_engine.update_weights_bucket_megabytes) << 20
        digests: dict[str, bytes] = {}
        bucket: list[tuple[str, torch.Tensor]] = []
        bucket_bytes = 0
        await server.begin_weight_update.remote(peft_config=peft_config, adapter=adapter)
        try:
            async for name, tensor in ensure_async_iterator(weights):
                if hasattr(tensor, "full_tensor"):
                    tensor = tensor.full_tensor()
                sent = tensor.detach().to(device="cpu", dtype=self.dtype).clone()
                digests[name] = tensor_digest(name, sent)
                bucket.append((name, sent))
                bucket_bytes += sent.numel() * sent.element_size()
                if bucket_bytes >= bucket_limit:
                    await server.load_weight_bucket.remote(bucket)
                    bucket, bucket_bytes = [], 0
            if bucket:
                await server.load_weight_bucket.remote(bucket)
        except BaseException as error:
            # the stream broke part-way (e.g. the checkpoint engine lost its sender): what was loaded mixes two
            # versions, so the server must not generate from it
            await server.abort_weight_update.remote(reason=f"{type(error).__name__}: {error}")
            raise
        self.last_push = await server.finish_weight_update.remote(
            global_steps=global_steps, sent_checksum=combine_digests(digests)
        )
        logger.info(
            "CPU rollout replica %d: pushed %d tensors (version %s, checksum %s) in %.2fs",
            self.replica_rank,
            len(digests),
            global_steps,
            self.last_push["weight_checksum"],
            time.perf_counter() - start,
        )

    def generate_sequences(self, prompts: Any):
        raise NotImplementedError("the CPU rollout serves the async agent loop; it has no synchronous batch mode")
