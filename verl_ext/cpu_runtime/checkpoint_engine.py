"""Checkpoint-engine backend ``gloo``: weights from the trainer to rollout engines on their own resources, over
torch's gloo collectives (CPU tensors, TCP).

verl moves the actor's weights to a rollout engine that does not share its process (``separate_async``, and
``delayed_sync`` with ``actor_rollout_ref.hybrid_engine=false``) through a checkpoint engine picked from
``verl.checkpoint_engine.CheckpointEngineRegistry`` by ``actor_rollout_ref.rollout.checkpoint_engine.backend``.
verl's own backends need a GPU (``nccl`` and ``nixl`` import cupy); this one needs none, so a CPU run takes
exactly the path a GPU run takes -- verl's ``CheckpointEngineManager.update_weights``: abort, build the group
(``prepare`` -> ``build_topology`` -> ``init_process_group``), ``send_weights`` in the actor workers and
``receive_weights`` -> ``server_adapter.update_weights`` in the rollout's ``CheckpointEngineWorker``, then
``finalize`` -- with gloo where verl's ``nccl`` backend has NCCL.

The group (rebuilt at every push, as ``nccl``'s ``rebuild_group=True``): rank 0 is actor rank 0, the only
sender (the other actor ranks get rank -1 and only walk the weight generator, which is collective over the
actor's FSDP group); ranks 1..R are the rollout workers. Rank 0 hosts the rendezvous (a ``TCPStore`` it
opens in ``prepare`` on a free port of its node IP, listening there only:
:mod:`verl_ext.cpu_runtime.loopback_store`). Weights travel in buckets of
``checkpoint_engine.update_weights_bucket_megabytes``; each bucket is three broadcasts from rank 0: a
header ``[h, b]`` (int64), the pickled bucket description (``h`` bytes: verl's ``TensorMeta`` of every
chunk, ``is_last``, the version) and the ``b`` payload bytes, each chunk at an offset aligned to 16 bytes. verl's ``split_weight_chunks`` /
``merge_weight_chunks`` cut and rejoin tensors larger than a bucket.

**Integrity.** The sender digests every tensor it sends (:mod:`verl_ext.cpu_runtime.weight_checksum`) and puts the
checksum of the whole set in the last header; every receiver digests what it rebuilt and raises
:class:`WeightTransferError` when the checksums, the tensor names or the version differ, so a push that lost
or damaged a tensor never completes. **Failures.** A rank whose push is interrupted (its peer broke, the
weights could not be produced, the consumer stopped) drops the group at once, closing its connections, so its
peers fail at once too; every collective waits at most ``timeout_seconds``
(``actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs.gloo.timeout_seconds``, default
:data:`DEFAULT_TIMEOUT_SECONDS`); a peer that dies closes its TCP connections, which gloo reports at once.
Either way the rank raises :class:`WeightTransferError` naming its rank, the phase, the version and the
bytes moved so far; verl's manager re-raises it in the trainer (``ray.get``), which ends the run. The CPU
rollout's adapter marks a half-loaded engine unusable (:mod:`verl_ext.cpu_runtime.server_adapter`), so it cannot
generate from a mix of two versions.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import pickle
import time
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Optional

import torch
from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry, merge_weight_chunks, split_weight_chunks
from verl.workers.rollout.utils import ensure_async_iterator

from verl_ext import metric_names
from verl_ext.checkpoint_backends import CPU_BACKEND
from verl_ext.cpu_runtime.loopback_store import serve_store
from verl_ext.cpu_runtime.weight_checksum import combine_digests, tensor_digest

logger = logging.getLogger(__name__)

BACKEND_NAME = CPU_BACKEND
TIMEOUT_KEY = f"actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs.{BACKEND_NAME}.timeout_seconds"
DEFAULT_TIMEOUT_SECONDS = 300.0
# every chunk starts at a multiple of this many bytes in its bucket: the receiver views it as its dtype (at most
# 8 bytes per element), which torch allows only at an offset divisible by the element size
CHUNK_ALIGNMENT = 16
SENDER_RANK = 0
NOT_IN_GROUP = -1

# metrics returned by send_weights (verl merges them into the step's metrics); names: verl_ext.metric_names
WEIGHT_BYTES = metric_names.GLOO_WEIGHT_BYTES  # the tensors' bytes (the wire adds alignment)
BUCKETS_SENT = metric_names.GLOO_BUCKETS_SENT
SEND_SECONDS = metric_names.GLOO_SEND_SECONDS


class WeightTransferError(RuntimeError):
    """A weight push through the ``gloo`` checkpoint engine failed: a peer died or stalled, or the weights
    that arrived are not the ones sent. The rollout engine did not get the new version."""


@dataclass(frozen=True)
class Rendezvous:
    """Where the group meets: rank 0's ``TCPStore``."""

    host: str
    port: int


@dataclass(frozen=True)
class WorkerMetadata:
    """What ``prepare`` reports to ``build_topology``: only the sender (actor rank 0) carries the rendezvous."""

    rendezvous: Optional[Rendezvous] = None


def aligned(offset: int) -> int:
    """``offset`` rounded up to a multiple of :data:`CHUNK_ALIGNMENT` bytes."""
    return -(-offset // CHUNK_ALIGNMENT) * CHUNK_ALIGNMENT


def _node_ip() -> str:
    import ray

    return ray.util.get_node_ip_address().strip("[]")


class GlooCheckpointEngine(CheckpointEngine):
    """verl ``CheckpointEngine`` backend ``gloo`` (see the module docstring).

    Args:
        bucket_size: bytes per bucket (verl passes ``update_weights_bucket_megabytes << 20``).
        is_master: True in actor rank 0, the sender and rendezvous host (verl passes it to actor workers).
        timeout_seconds: the longest any rendezvous or broadcast may wait for its peers.
    """

    def __init__(self, bucket_size: int, is_master: bool = False, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS):
        if not isinstance(bucket_size, int) or bucket_size < 1:
            raise ValueError(f"checkpoint engine {BACKEND_NAME}: bucket_size must be a positive integer, got {bucket_size!r}")
        if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, (int, float)) or not timeout_seconds > 0:
            raise ValueError(f"{TIMEOUT_KEY} must be a number > 0, got {timeout_seconds!r}")
        self.bucket_size = bucket_size
        self.is_master = is_master
        self.timeout = datetime.timedelta(seconds=float(timeout_seconds))
        self.rank: Optional[int] = None
        self.world_size: Optional[int] = None
        self._store: Any = None
        self._group: Any = None
        self._rendezvous: Optional[Rendezvous] = None

    # ------------------------------------------------------------------ group set-up (verl's manager calls these)

    def prepare(self) -> WorkerMetadata:
        """Sender: open the rendezvous store on a free port. Everyone: report what ``build_topology`` needs."""
        if not self.is_master:
            return WorkerMetadata()
        host = _node_ip()
        self._store = serve_store(host, 0, timeout=self.timeout, wait_for_workers=False)  # listening on host only
        self._rendezvous = Rendezvous(host=host, port=int(self._store.port))
        return WorkerMetadata(rendezvous=self._rendezvous)

    @classmethod
    def build_topology(
        cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[WorkerMetadata]
    ) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        """Actor rank 0 sends (rank 0), the other actor ranks stay out (-1), rollout workers receive (1..R)."""
        rendezvous = metadata[0].rendezvous if metadata else None
        if rendezvous is None:
            raise WeightTransferError(
                f"checkpoint engine {BACKEND_NAME}: actor rank 0 reported no rendezvous; it must be built with "
                "is_master=True (verl's actor worker does so on torch.distributed rank 0)"
            )
        world_size = 1 + rollout_world_size
        actor_kwargs = {
            "rank": [SENDER_RANK] + [NOT_IN_GROUP] * (actor_wg_world_size - 1),
            "world_size": [world_size] * actor_wg_world_size,
            "rendezvous": [rendezvous] * actor_wg_world_size,
        }
        rollout_kwargs = {
            "rank": list(range(1, world_size)),
            "world_size": [world_size] * rollout_world_size,
            "rendezvous": [rendezvous] * rollout_world_size,
        }
        return actor_kwargs, rollout_kwargs

    def init_process_group(self, rank: int, world_size: int, rendezvous: Rendezvous) -> None:
        """Join the group (blocks until every rank has joined, at most ``timeout_seconds``)."""
        self.rank, self.world_size = rank, world_size
        if rank == NOT_IN_GROUP:
            return
        try:
            if rank != SENDER_RANK:
                self._store = torch.distributed.TCPStore(
                    rendezvous.host, rendezvous.port, is_master=False, timeout=self.timeout
                )
            elif self._store is None:
                raise WeightTransferError("rank 0 joins the group before prepare() opened the rendezvous")
            self._group = torch.distributed.ProcessGroupGloo(self._store, rank, world_size, self.timeout)
        except WeightTransferError:
            raise
        except Exception as error:  # noqa: BLE001 -- torch raises RuntimeError/DistStoreError; one message for both
            raise self._failure("joining the group", None, 0, error) from error

    def _abandon_group(self) -> None:
        """Close this rank's connections now (dropping the group does): its peers' waits end with an error."""
        self._group = None
        self._store = None

    def finalize(self) -> None:
        """Drop the group and the rendezvous (a new one is built at the next push)."""
        self._group = None
        self._store = None
        self._rendezvous = None
        self.rank = None
        self.world_size = None

    # ------------------------------------------------------------------ transfer

    async def send_weights(self, weights: Any, global_steps: Optional[int] = None) -> dict[str, float]:
        """Rank 0: broadcast every ``(name, tensor)`` of ``weights``; rank -1: only walk the generator.

        Whatever interrupts the push here (a broken peer, an error while producing the weights) drops the
        group, which closes its connections: the receivers fail at once instead of at their timeout."""
        try:
            return await self._send_weights(weights, global_steps)
        except BaseException:
            self._abandon_group()
            raise

    async def _send_weights(self, weights: Any, global_steps: Optional[int]) -> dict[str, float]:
        if self.rank is None:
            raise WeightTransferError(f"checkpoint engine {BACKEND_NAME}: send_weights before init_process_group")
        if self.rank == NOT_IN_GROUP:
            async for _name, _weight in ensure_async_iterator(weights):
                pass  # producing each full tensor is collective over the actor ranks
            return {}
        if self.rank != SENDER_RANK:
            raise WeightTransferError(f"checkpoint engine {BACKEND_NAME}: rank {self.rank} is a receiver, not a sender")

        digests: dict[str, bytes] = {}

        async def digested() -> AsyncGenerator[tuple[str, torch.Tensor], None]:
            async for name, weight in ensure_async_iterator(weights):
                if hasattr(weight, "full_tensor"):
                    weight = weight.full_tensor()
                weight = weight.detach().to("cpu").contiguous()
                digests[name] = tensor_digest(name, weight)
                yield name, weight

        started = time.perf_counter()
        sent = {"bytes": 0, "buckets": 0}
        bucket = torch.empty(self.bucket_size, dtype=torch.uint8)
        chunks: list[Any] = []
        offset = weight_bytes = 0

        async def flush(is_last: bool) -> None:
            header = {"chunks": chunks, "is_last": is_last, "global_steps": global_steps}
            if is_last:
                header["checksum"] = combine_digests(digests)
                header["names"] = sorted(digests)
            await self._broadcast_bucket(header, bucket[:offset], global_steps, sent)

        async for meta, chunk in split_weight_chunks(digested(), self.bucket_size):
            offset = aligned(offset)  # the receiver views each chunk as its dtype: keep it aligned
            if offset + meta.chunk_size > self.bucket_size:
                await flush(is_last=False)
                bucket = torch.empty(self.bucket_size, dtype=torch.uint8)
                chunks, offset = [], 0
            meta.offset = offset
            bucket[offset : offset + meta.chunk_size].copy_(chunk)
            chunks.append(meta)
            weight_bytes += meta.chunk_size
            offset += meta.chunk_size
        await flush(is_last=True)
        seconds = time.perf_counter() - started
        logger.info(
            "gloo checkpoint engine: sent %d tensors (%d bytes, %d buckets) of version %s in %.2fs",
            len(digests), sent["bytes"], sent["buckets"], global_steps, seconds,
        )
        return {WEIGHT_BYTES: float(weight_bytes), BUCKETS_SENT: float(sent["buckets"]), SEND_SECONDS: seconds}

    async def receive_weights(self, global_steps: Optional[int] = None) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        """Ranks 1..R: yield the sender's ``(name, tensor)`` pairs; raise if they are not exactly what was sent.

        A push interrupted here (the consumer stopped, a broken peer) drops the group, as in ``send_weights``."""
        try:
            async for name, tensor in self._receive_weights(global_steps):
                yield name, tensor
        except BaseException:
            self._abandon_group()
            raise

    async def _receive_weights(self, global_steps: Optional[int]) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        if self.rank is None or self.rank in (NOT_IN_GROUP, SENDER_RANK):
            raise WeightTransferError(
                f"checkpoint engine {BACKEND_NAME}: receive_weights on rank {self.rank} (receivers are ranks 1..R)"
            )
        digests: dict[str, bytes] = {}
        last_header: dict[str, Any] = {}
        received = {"bytes": 0, "buckets": 0}

        async def chunks():
            while True:
                header, payload = await self._receive_bucket(global_steps, received)
                for meta in header["chunks"]:
                    yield meta, payload[meta.offset : meta.offset + meta.chunk_size]
                if header["is_last"]:
                    last_header.update(header)
                    return

        async for name, tensor in merge_weight_chunks(chunks(), self.bucket_size):
            digests[name] = tensor_digest(name, tensor)
            yield name, tensor
        self._verify(last_header, digests, global_steps, received["bytes"])

    def _verify(self, header: dict[str, Any], digests: dict[str, bytes], global_steps: Optional[int], moved: int) -> None:
        problems = []
        if header.get("global_steps") != global_steps:
            problems.append(f"the sender sent version {header.get('global_steps')}, this receiver expected {global_steps}")
        if header.get("names") != sorted(digests):
            missing = sorted(set(header.get("names") or ()) - set(digests))
            extra = sorted(set(digests) - set(header.get("names") or ()))
            problems.append(f"tensor names differ (missing {missing[:3]}, unexpected {extra[:3]})")
        checksum = combine_digests(digests)
        if header.get("checksum") != checksum:
            problems.append(f"checksum sent {header.get('checksum')}, received {checksum}")
        if problems:
            raise WeightTransferError(
                f"checkpoint engine {BACKEND_NAME} rank {self.rank}: the weights of version {global_steps} arrived "
                f"damaged ({moved} bytes): {'; '.join(problems)}"
            )

    # ------------------------------------------------------------------ one bucket = three broadcasts from rank 0

    async def _broadcast_bucket(self, header: dict[str, Any], payload: torch.Tensor, version, sent: dict) -> None:
        encoded = torch.frombuffer(bytearray(pickle.dumps(header)), dtype=torch.uint8)
        sizes = torch.tensor([encoded.numel(), payload.numel()], dtype=torch.int64)
        for phase, tensor in (("bucket header", sizes), ("bucket description", encoded), ("bucket payload", payload)):
            await self._broadcast(tensor, phase, version, sent["bytes"])
        sent["bytes"] += payload.numel()
        sent["buckets"] += 1

    async def _receive_bucket(self, version, received: dict) -> tuple[dict[str, Any], torch.Tensor]:
        sizes = torch.zeros(2, dtype=torch.int64)
        await self._broadcast(sizes, "bucket header", version, received["bytes"])
        encoded = torch.empty(int(sizes[0]), dtype=torch.uint8)
        await self._broadcast(encoded, "bucket description", version, received["bytes"])
        payload = torch.empty(int(sizes[1]), dtype=torch.uint8)  # a new buffer per bucket: yielded views stay valid
        await self._broadcast(payload, "bucket payload", version, received["bytes"])
        received["bytes"] += payload.numel()
        received["buckets"] += 1
        return pickle.loads(encoded.numpy().tobytes()), payload

    async def _broadcast(self, tensor: torch.Tensor, phase: str, version, moved: int) -> None:
        if self._group is None:
            raise WeightTransferError(f"checkpoint engine {BACKEND_NAME} rank {self.rank}: no group (init_process_group not called)")
        options = torch.distributed.BroadcastOptions()
        options.rootRank = SENDER_RANK
        options.rootTensor = 0

        def run() -> None:
            self._group.broadcast([tensor], options).wait(self.timeout)

        try:
            await asyncio.to_thread(run)  # gloo blocks: keep the worker's event loop free
        except Exception as error:  # noqa: BLE001 -- gloo raises RuntimeError (peer closed, timeout)
            raise self._failure(phase, version, moved, error) from error

    def _failure(self, phase: str, version, moved: int, error: BaseException) -> WeightTransferError:
        role = "sender" if self.rank == SENDER_RANK else "receiver"
        return WeightTransferError(
            f"checkpoint engine {BACKEND_NAME} rank {self.rank}/{self.world_size} ({role}): {phase} failed for weight "
            f"version {version} after {moved} payload bytes: {type(error).__name__}: {error}. A peer died or did "
            f"not answer within {self.timeout.total_seconds():g} s ({TIMEOUT_KEY}); the rollout engine did not get "
            "this version."
        )


def register_gloo_checkpoint_engine() -> None:
    """Register backend ``gloo`` in verl's ``CheckpointEngineRegistry`` (refuses to replace another class)."""
    registered = CheckpointEngineRegistry._registry.get(BACKEND_NAME)
    if registered is not None and registered is not GlooCheckpointEngine:
        raise RuntimeError(
            f"checkpoint engine backend {BACKEND_NAME!r} is already registered by {registered.__module__}."
            f"{registered.__qualname__}; verl-ext will not replace it"
        )
    CheckpointEngineRegistry.register(BACKEND_NAME)(GlooCheckpointEngine)


register_gloo_checkpoint_engine()
