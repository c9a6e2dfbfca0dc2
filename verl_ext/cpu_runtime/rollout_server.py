"""The CPU rollout server: a Ray actor that generates with ``transformers`` and keeps vLLM's contract.

It stands where verl's ``vLLMHttpServer`` stands (one per rollout replica, reached through verl's load
balancer with ``generate(prompt_ids, sampling_params, request_id, ...) -> TokenOutput``) and follows the
same rules, so trainer code that would be wrong with vLLM is wrong here too:

- it returns the log-prob of every generated token (:mod:`verl_ext.cpu_runtime.generation`);
- its weights change only through a weight push (``begin_weight_update`` / ``load_weight_bucket`` /
  ``finish_weight_update``, driven by :class:`verl_ext.cpu_runtime.server_adapter.CPUServerAdapter` from verl's
  checkpoint engine ``update_weights``), never by reading the trainer's state;
- ``sleep()`` follows vLLM's levels: with ``free_cache_engine`` in hybrid (colocated-with-trainer) mode it
  is level 2, which *discards* the weights (their memory is freed); ``wake_up(tags=["weights"])`` only
  re-allocates them, uninitialised. Generating while asleep, or before the next push has filled the
  weights, raises :class:`RolloutWeightsUnavailable`. Weights that were never pushed (``load_format=dummy``)
  are not usable either;
- it reports which weights it holds: ``weight_state()`` returns the version (the trainer step of the
  last push) and a checksum (:mod:`verl_ext.cpu_runtime.weight_checksum`); every change is appended to the event
  log (:mod:`verl_ext.rollout_events`), and each response carries ``extra_fields["global_steps"]``
  (read by verl's staleness metrics) and ``extra_fields["weight_checksum"]``.

Server options come from ``actor_rollout_ref.rollout.engine_kwargs.cpu`` (checked by
:func:`check_engine_options`, in the driver before Ray too): ``event_log`` (path of the JSONL event log;
default: the ``VERL_EXT_CPU_ROLLOUT_EVENTS`` environment variable, else none), ``attn_implementation``
(default ``sdpa``), ``max_batch_size`` (default 32: concurrent requests sharing their sampling parameters
and their prompt width are generated together, up to this many; every batch is filled up to exactly this
many rows, so that a request's tokens and log-probs are the same bits whatever shares its batch, see
:mod:`verl_ext.cpu_runtime.generation` -- changing it changes the bits, as a dtype would) and
``batch_wait_seconds`` (default 0.01: how long the first request of a batch waits for others). Only one
rank per replica is supported (``tensor_model_parallel_size = data_parallel_size =
pipeline_model_parallel_size = 1``).

Sampling seeds: a request's ``sampling_params["seed"]`` (verl-ext's seeded agent loop sends one per
response, :mod:`verl_ext.seeded_agent_loop`) seeds that request's own generator, so what it samples does
not depend on the replica, the arrival order or the other requests. A request without a seed gets one from
the server (derived from ``rollout.seed``, the replica rank and how many unseeded requests came before it):
reproducible only when the requests arrive in the same order.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, replace
from typing import Any, Optional

import torch

from verl_ext.config_values import is_finite_number, is_int, reject
from verl_ext.cpu_runtime.generation import (
    GenerationResult,
    SamplingRequest,
    generate_batch_with_log_probs,
    prompt_width,
    sampling_key,
    sampling_request_from_params,
)
from verl_ext.cpu_runtime.lora import RolloutLoRA, adapter_checksum, lora_as_adapter
from verl_ext.rollout_events import RolloutEventLog
from verl_ext.cpu_runtime.weight_checksum import combine_digests, tensor_digest, weight_checksum
from verl_ext.seeding import derive_seed

logger = logging.getLogger(__name__)

EVENT_LOG_ENV = "VERL_EXT_CPU_ROLLOUT_EVENTS"
ENGINE_KWARGS_KEY = "cpu"

# What the weights the server holds are.
DUMMY = "dummy"  # random initialisation (load_format=dummy): not usable until the first push
CHECKPOINT = "checkpoint"  # loaded from the model path at start-up
PUSHED = "pushed"  # filled by the last weight push
DISCARDED = "discarded"  # freed by a level-2 sleep
ALLOCATED = "allocated"  # re-allocated by wake_up(tags=["weights"]), uninitialised until the next push
INCOMPLETE = "incomplete"  # a push failed part-way: a mix of two versions, unusable until a complete push
USABLE_WEIGHTS = (CHECKPOINT, PUSHED)


DEFAULT_MAX_BATCH_SIZE = 32  # rows of every generate() call: requests generated together, inert rows fill the rest
DEFAULT_BATCH_WAIT_SECONDS = 0.01  # how long the first queued request waits for others to join its batch


class RolloutWeightsUnavailable(RuntimeError):
    """Generation was requested while the server holds no usable weights (see the module docstring)."""


@dataclass
class PendingRequest:
    """A request waiting for the batcher; ``result`` receives (generation, weight checksum, weight version)."""

    request_id: str
    prompt_ids: list[int]
    request: SamplingRequest
    width: int  # the prompt's padded width (generation.prompt_width): requests of one batch share it
    result: "asyncio.Future[tuple[GenerationResult, Optional[str], Optional[int]]]"


def engine_options(rollout_config: Any) -> dict[str, Any]:
    """This backend's options: ``rollout.engine_kwargs.cpu`` as a plain dict (empty when unset)."""
    engine_kwargs = getattr(rollout_config, "engine_kwargs", None) or {}
    options = engine_kwargs.get(ENGINE_KWARGS_KEY) or {}
    return dict(options)


OPTIONS_KEY = f"actor_rollout_ref.rollout.engine_kwargs.{ENGINE_KWARGS_KEY}"
OPTION_NAMES = ("event_log", "attn_implementation", "max_batch_size", "batch_wait_seconds")
ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager")


def check_engine_options(options: dict[str, Any]) -> None:
    """Refuse an unknown option or a value the server cannot use, naming the key and what it accepts."""
    for name, value in options.items():
        key = f"{OPTIONS_KEY}.{name}"
        if name not in OPTION_NAMES:
            reject(key, value, f"one of the options {', '.join(OPTION_NAMES)} (no other option exists)")
        if name == "attn_implementation" and value not in ATTENTION_IMPLEMENTATIONS:
            reject(key, value, " or ".join(ATTENTION_IMPLEMENTATIONS))
        if name == "max_batch_size" and not (is_int(value) and value >= 1):
            reject(key, value, "an integer >= 1", "Every generate() call has exactly this many rows.")
        if name == "batch_wait_seconds" and not (is_finite_number(value) and value >= 0):
            reject(key, value, "a number of seconds >= 0")


def sleep_level(rollout_mode_value: str, lora_adapter: bool = False) -> int:
    """The vLLM sleep level verl uses: 2 (discard weights) in hybrid mode, 1 (keep weights) otherwise, and 1 when
    verl pushes LoRA adapters (its vLLM server keeps the base weights, which only the first push sends)."""
    return 2 if rollout_mode_value == "hybrid" and not lora_adapter else 1


class CPURolloutServer:
    """One replica's generation engine (wrapped with ``ray.remote`` by the replica)."""

    def __init__(self, config: Any, model_config: Any, rollout_mode: Any, replica_rank: int, node_rank: int = 0):
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.config import HFModelConfig

        self.config = omega_conf_to_dataclass(config)
        self.model_config = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.rollout_mode = rollout_mode
        self.replica_rank = replica_rank
        self.node_rank = node_rank
        self.options = engine_options(self.config)
        check_engine_options(self.options)

        log_path = self.options.get("event_log") or os.environ.get(EVENT_LOG_ENV)
        self.events = RolloutEventLog(log_path, replica_rank=replica_rank)

        torch.manual_seed(int(self.config.seed) + replica_rank)  # the random weights of load_format=dummy
        self.unseeded_requests = 0  # requests that came without a sampling seed (each gets one from the server)
        self.dtype = _torch_dtype(self.config.dtype)
        self.model = self._build_model()
        # LoRA adapter pushes (verl_ext.cpu_runtime.lora): in adapter mode the layers are injected at the first push
        self.lora = RolloutLoRA(self.model, enabled=lora_as_adapter(self.model_config))
        self._parameter_shapes = {name: p.shape for name, p in self._parameters().items()}
        self.eos_token_ids = self._eos_token_ids()
        self.pad_token_id = self._pad_token_id()
        hf_config = self.model_config.hf_config
        self.max_model_len = int(self.config.max_model_len or getattr(hf_config, "max_position_embeddings", 2048))

        self.global_steps: Optional[int] = None  # version of the weights: trainer step of the last push
        self.weights = CHECKPOINT if self.config.load_format not in ("dummy", None) else DUMMY
        self.asleep = False
        self.checksum = weight_checksum(self._parameters()) if self.weights == CHECKPOINT else None
        self.requests_served = 0
        self.batches_generated = 0  # generate() calls since the last record (each of max_batch_size rows)
        self._update: Optional[dict[str, Any]] = None
        self.max_batch_size = int(self.options.get("max_batch_size", DEFAULT_MAX_BATCH_SIZE))
        self.batch_wait_seconds = float(self.options.get("batch_wait_seconds", DEFAULT_BATCH_WAIT_SECONDS))
        self._pending: list[PendingRequest] = []
        self._batcher: Optional[asyncio.Task] = None
        self._engine_lock = asyncio.Lock()
        self._admission = asyncio.Event()
        self._admission.set()
        self._record("initialized", node_id=_ray_node_id(), pid=os.getpid())

    # ------------------------------------------------------------------ set-up

    def _build_model(self) -> torch.nn.Module:
        from transformers import AutoModelForCausalLM

        attn_implementation = self.options.get("attn_implementation", "sdpa")
        if self.config.load_format in ("dummy", None):
            model = AutoModelForCausalLM.from_config(
                self.model_config.hf_config, dtype=self.dtype, attn_implementation=attn_implementation
            )
        else:
            model = AutoModelForCausalLM.from_pretrained(
                self.model_config.local_path, dtype=self.dtype, attn_implementation=attn_implementation
            )
        return model.to(self.dtype).eval()

    def _eos_token_ids(self) -> list[int]:
        ids: list[int] = []
        generation_config = self.model_config.generation_config
        for source in (getattr(generation_config, "eos_token_id", None), self.model_config.tokenizer.eos_token_id):
            if source is None:
                continue
            for token_id in source if isinstance(source, (list, tuple)) else [source]:
                if int(token_id) not in ids:
                    ids.append(int(token_id))
        if not ids:
            raise ValueError(f"model at {self.model_config.local_path} defines no end-of-sequence token")
        return ids

    def _pad_token_id(self) -> int:
        tokenizer = self.model_config.tokenizer
        return int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_token_ids[0])

    def _parameters(self) -> dict[str, torch.Tensor]:
        return dict(self.model.named_parameters())

    def _record(self, event: str, **fields: Any) -> dict[str, Any]:
        record = self.events.write(
            event,
            weights=self.weights,
            weight_version=self.global_steps,
            weight_checksum=self.checksum,
            requests_served=self.requests_served,
            batches_generated=self.batches_generated,
            **fields,
        )
        self.requests_served = 0
        self.batches_generated = 0
        return record

    # ------------------------------------------------------------------ what verl's replica and load balancer call

    async def ready(self) -> bool:
        return True

    def weight_state(self) -> dict[str, Any]:
        """The weights held now: ``{"weights", "weight_version", "weight_checksum", "asleep"}``."""
        return {
            "weights": self.weights,
            "weight_version": self.global_steps,
            "weight_checksum": self.checksum,
            "asleep": self.asleep,
        }

    def events_so_far(self) -> list[dict[str, Any]]:
        return list(self.events.records)

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Optional[list[Any]] = None,
        video_data: Optional[list[Any]] = None,
        audio_data: Optional[list[Any]] = None,
        mm_processor_kwargs: Optional[dict[str, Any]] = None,
        priority: int = 0,
        **kwargs: Any,
    ):
        from verl.utils.tokenizer import normalize_token_ids
        from verl.workers.rollout.replica import TokenOutput

        if image_data or video_data or audio_data:
            raise NotImplementedError("CPU rollout: multimodal inputs are not supported")
        await self._admission.wait()
        prompt_ids = normalize_token_ids(prompt_ids)
        request = sampling_request_from_params(
            sampling_params,
            prompt_length_tokens=len(prompt_ids),
            configured_prompt_length=self.config.prompt_length,
            configured_response_length=self.config.response_length,
            max_model_len=self.max_model_len,
        )
        if request.seed is None:
            request = replace(request, seed=self._seed_for_unseeded_request())
        width = prompt_width(len(prompt_ids), int(self.config.prompt_length))
        pending = PendingRequest(request_id, prompt_ids, request, width, asyncio.get_running_loop().create_future())
        self._pending.append(pending)
        if self._batcher is None or self._batcher.done():
            self._batcher = asyncio.create_task(self._generate_pending())
        result, checksum, version = await pending.result
        return TokenOutput(
            token_ids=result.token_ids,
            log_probs=result.log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": version, "weight_checksum": checksum},
        )

    def _seed_for_unseeded_request(self) -> int:
        """A seed for a request that brought none: depends on how many such requests came before it."""
        seed = derive_seed(
            "verl_ext.cpu.unseeded_request", int(self.config.seed), self.replica_rank, self.unseeded_requests
        )
        self.unseeded_requests += 1
        return seed

    async def _generate_pending(self) -> None:
        """Generate queued requests in batches of equal sampling parameters and prompt width, in arrival
        order, until the queue is empty."""
        await asyncio.sleep(self.batch_wait_seconds)
        while self._pending:
            key = _batch_key(self._pending[0])
            batch = [pending for pending in self._pending if _batch_key(pending) == key]
            batch = batch[: self.max_batch_size]
            for pending in batch:
                self._pending.remove(pending)
            async with self._engine_lock:
                try:
                    self._require_usable_weights([pending.request_id for pending in batch])
                    results = await asyncio.to_thread(
                        generate_batch_with_log_probs,
                        self.model,
                        [pending.prompt_ids for pending in batch],
                        [pending.request for pending in batch],
                        eos_token_ids=self.eos_token_ids,
                        pad_token_id=self.pad_token_id,
                        rows=self.max_batch_size,
                        width=batch[0].width,
                    )
                except Exception as error:  # noqa: BLE001 -- handed to every waiting request
                    for pending in batch:
                        if not pending.result.done():
                            pending.result.set_exception(error)
                    continue
                self.requests_served += len(batch)
                self.batches_generated += 1
                for pending, result in zip(batch, results):
                    if not pending.result.done():
                        pending.result.set_result((result, self.checksum, self.global_steps))

    def _require_usable_weights(self, request_ids: list[str]) -> None:
        problem = None
        if self.asleep:
            problem = "the engine is asleep (sleep() was called and wake_up() has not been)"
        elif self.weights not in USABLE_WEIGHTS:
            problem = {
                DUMMY: "it holds dummy weights (load_format=dummy) and no weights were pushed yet",
                DISCARDED: "sleep() discarded the weights (level 2, as colocated vLLM) and none were pushed since",
                ALLOCATED: "wake_up() re-allocated the weights after sleep() discarded them, "
                "but update_weights has not filled them",
                INCOMPLETE: "the last weight push failed part-way, so the weights mix two versions",
            }.get(self.weights, f"weights are {self.weights!r}")
        else:
            problem = self.lora.missing_adapter_problem()
        if problem is not None:
            self._record("generate_rejected", request_ids=request_ids, reason=problem)
            raise RolloutWeightsUnavailable(
                f"CPU rollout replica {self.replica_rank}: generate() refused because {problem}. "
                "A vLLM engine would generate from garbage here: push weights with the checkpoint engine's "
                "update_weights before generating."
            )

    async def sleep(self):
        """vLLM's sleep: level 2 in hybrid mode discards the weights; a no-op unless ``free_cache_engine``."""
        if self.node_rank != 0 or not self.config.free_cache_engine:
            return
        mode = getattr(self.rollout_mode, "value", str(self.rollout_mode))
        if mode == "standalone":
            return
        async with self._engine_lock:
            level = sleep_level(mode, self.lora.enabled)
            self.lora.loaded = False  # as every sleep discards what a push must restore, the adapter is re-pushed
            if level == 2 and self.weights != DISCARDED:
                for parameter in self._parameters().values():
                    parameter.data = torch.empty(0, dtype=parameter.dtype)
                self.weights, self.checksum = DISCARDED, None
            self.asleep = True
            self._record("sleep", level=level)

    async def wake_up(self, tags: Optional[list[str]] = None):
        """vLLM's wake_up: ``weights`` re-allocates discarded weights (uninitialised); ``kv_cache`` resumes."""
        mode = getattr(self.rollout_mode, "value", str(self.rollout_mode))
        if mode == "standalone":
            return
        tags = list(tags or ["kv_cache", "weights"])
        async with self._engine_lock:
            if "weights" in tags and self.weights == DISCARDED:
                for name, parameter in self._parameters().items():
                    shape = self._parameter_shapes[name]
                    parameter.data = torch.full(shape, float("nan"), dtype=parameter.dtype)
                self.weights = ALLOCATED
            if "kv_cache" in tags:
                self.asleep = False
            self._record("wake_up", tags=tags)

    async def begin_weight_update(self, peft_config: Optional[dict[str, Any]] = None, adapter: bool = False) -> None:
        """Open a weight push. Pushing into weights discarded by sleep and not re-allocated is an error.

        ``peft_config`` (verl's LoRA adapter mode, :mod:`verl_ext.cpu_runtime.lora`): the push's adapter structure; with
        ``adapter`` it carries the adapter's tensors, without it the base weights (verl's one-time base sync)."""
        if adapter and peft_config is None:
            raise ValueError("an adapter push needs the adapter's peft_config")
        async with self._engine_lock:
            if peft_config is not None and self.lora.prepare(peft_config):
                self._parameter_shapes = {name: p.shape for name, p in self._parameters().items()}
            if self.weights == DISCARDED:
                raise RolloutWeightsUnavailable(
                    f"CPU rollout replica {self.replica_rank}: update_weights after sleep() discarded the weights "
                    "and before wake_up(tags=['weights']) re-allocated them"
                )
            if self._update is not None:
                raise RuntimeError(f"CPU rollout replica {self.replica_rank}: a weight push is already open")
            self._update = {"digests": {}, "previous_checksum": self.checksum, "previous_weights": self.weights,
                            "adapter": adapter, "base_sync": peft_config is not None and not adapter}

    async def load_weight_bucket(self, named_tensors: list[tuple[str, torch.Tensor]]) -> int:
        """Copy one bucket of ``(name, tensor)`` pairs into the held weights; returns how many it took."""
        if self._update is None:
            raise RuntimeError("load_weight_bucket outside begin_weight_update/finish_weight_update")
        targets = self.model.state_dict(keep_vars=True)
        async with self._engine_lock:
            for name, tensor in named_tensors:
                try:
                    target = targets[self.lora.target(name, self._update["adapter"], targets)]
                except KeyError as error:
                    raise KeyError(f"CPU rollout replica {self.replica_rank}: {error.args[0]}") from None
                if tuple(target.shape) != tuple(tensor.shape):
                    raise ValueError(
                        f"pushed weight {name!r} has shape {tuple(tensor.shape)}, the rollout model has "
                        f"{tuple(target.shape)}"
                    )
                converted = tensor.detach().to(dtype=target.dtype)
                with torch.no_grad():
                    target.data.copy_(converted)
                self._update["digests"][name] = tensor_digest(name, converted)
        return len(named_tensors)

    async def finish_weight_update(self, global_steps: Optional[int], sent_checksum: str) -> dict[str, Any]:
        """Close a weight push: check it was complete and intact, then adopt the new version and checksum."""
        if self._update is None:
            raise RuntimeError("finish_weight_update without begin_weight_update")
        update, self._update = self._update, None
        received = set(update["digests"])
        adapter_names = set(self.lora.adapter_parameters())
        if update["adapter"]:
            pushed = {self.lora.target(name, True, adapter_names) for name in received}
            missing = sorted(adapter_names - pushed)
            if missing:
                raise RolloutWeightsUnavailable(
                    f"CPU rollout replica {self.replica_rank}: the LoRA adapter push left {len(missing)} adapter "
                    f"tensors unfilled (first: {missing[:3]})")
        else:
            parameter_names = set(self._parameters()) - adapter_names
            targets = self.model.state_dict(keep_vars=True)
            missing = sorted(parameter_names - {self.lora.target(name, False, targets) for name in received})
            if missing and update["previous_weights"] not in USABLE_WEIGHTS:
                raise RolloutWeightsUnavailable(
                    f"CPU rollout replica {self.replica_rank}: the push left {len(missing)} weights uninitialised "
                    f"(first: {missing[:3]})"
                )
        transfer_checksum = combine_digests(update["digests"])
        if transfer_checksum != sent_checksum:
            raise RuntimeError(
                f"CPU rollout replica {self.replica_rank}: weights arrived corrupted "
                f"(sent checksum {sent_checksum}, received {transfer_checksum})"
            )
        async with self._engine_lock:
            if update["adapter"]:
                self.lora.loaded, self.lora.adapter_version = True, global_steps
            else:
                self.weights = PUSHED
                self.lora.loaded = False  # new base weights: the adapter that goes with them comes next
            self.checksum = weight_checksum(self._parameters())
            lora_fields = {} if not self.lora.enabled else {
                "adapter_checksum": adapter_checksum(self.lora.adapter_parameters()) if self.lora.config else None,
                "adapter_version": self.lora.adapter_version}
            if update["base_sync"]:
                # the base weights an adapter push completes (verl's one-time base sync): not a version yet
                return self._record("update_base_weights", previous_checksum=update["previous_checksum"],
                                    transfer_checksum=transfer_checksum, num_tensors=len(received), **lora_fields)
            self.global_steps = global_steps
            record = self._record(
                "update_weights",
                previous_checksum=update["previous_checksum"],
                transfer_checksum=transfer_checksum,
                num_tensors=len(received),
                **lora_fields,
            )
        return record

    async def abort_weight_update(self, reason: str) -> dict[str, Any]:
        """A push failed part-way (its sender died, its transfer was damaged): whatever it loaded mixes two
        versions, so the weights become unusable until a complete push (generating raises meanwhile)."""
        async with self._engine_lock:
            update, self._update = self._update, None
            loaded = len(update["digests"]) if update else 0
            if loaded:
                self.weights, self.checksum = INCOMPLETE, None
            return self._record("update_aborted", reason=reason, tensors_loaded=loaded)

    async def set_global_steps(self, global_steps: int):
        self.global_steps = global_steps

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def wait_for_requests_to_drain(self):
        async with self._engine_lock:
            return None

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False):
        """Stop admitting requests until ``resume_generation``; a request already generating finishes."""
        self._admission.clear()
        async with self._engine_lock:
            pass
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self):
        self._admission.set()

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None


def _batch_key(pending: PendingRequest) -> tuple:
    """Requests with equal keys can share a batch."""
    return (sampling_key(pending.request), pending.width)


def _ray_node_id() -> Optional[str]:
    """The Ray node this server runs on (which machine of a cluster), or None outside Ray."""
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None


def _torch_dtype(name: Any) -> torch.dtype:
    from verl.utils.torch_dtypes import PrecisionType

    return PrecisionType.to_dtype(name)
