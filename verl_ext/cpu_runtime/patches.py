"""The places where verl 0.9.1 leaves no extension point for a CPU run, and the minimal patch for each.

No verl file is edited. The patches are installed only when the CPU platform is selected
(``VERL_PLATFORM=cpu``, see :func:`verl_ext.cpu_runtime.registration.register_cpu_backend`), and each is guarded by
tests (``tests/cpu/test_patches.py``) that fail when a verl or torch upgrade makes it wrong or unnecessary.
Each is also listed in :mod:`verl_ext.verl_internals` (kind ``patch``), which ``verl-ext doctor`` checks against
the installed verl and torch (``tests/test_verl_internals.py`` keeps that list equal to :data:`PATCHES`).

1. ``duplicate_gloo_backend`` -- ``verl/utils/distributed.py`` (``initialize_global_process_group_ray``)
   builds the backend string ``f"cpu:gloo,{device}:{backend}"``, which on the CPU platform is
   ``"cpu:gloo,cpu:gloo"``; torch rejects the duplicated device ("Duplicate device type cpu").
   Patch: ``torch.distributed.init_process_group`` drops exact duplicate ``device:backend`` entries.

2. ``unpinned_cpu_offload`` -- ``verl/workers/engine/fsdp/transformer_impl.py`` (``_build_fsdp_module``)
   always builds ``CPUOffloadPolicy(pin_memory=True)`` for a forward-only FSDP2 engine (the reference
   policy); pinning host memory needs an NVIDIA driver. Patch: ``CPUOffloadPolicy`` never pins
   (on a CPU the parameters already live in host memory; there is nothing to pin for).

3. ``replay_buffer_poll_interval`` -- ``verl/trainer/ppo/v1/trainer_base.py`` (``_build_replay_buffer``)
   constructs ``ReplayBuffer`` without ``poll_interval``, so the trainer checks for finished rollouts
   every 2 s (the constructor default), with no config key to change it. On a GPU a rollout batch takes
   longer than that; on the tiny CPU model it takes ~0.1 s, and the fixed sleep made 80% of every step.
   Patch: the default becomes :data:`CPU_REPLAY_POLL_INTERVAL` seconds (an explicit argument still
   wins). Performance only: what is sampled, and when, is unchanged. verl's replay-buffer module takes
   ~5 s to import, so the patch is applied when verl imports it, not before (:attr:`Patch.waits_for`, through
   :func:`verl_ext.import_hooks.when_imported`, verl-ext's one mechanism for it).

4. ``batch_order`` -- ``verl/trainer/ppo/v1/replay_buffer.py`` (``ReplayBuffer._materialize_batch``) hands
   out a batch's trajectories in the order they reached the TransferQueue, i.e. the order the agent-loop
   and reward workers finished them, which changes from run to run; the update and the metrics reduce in
   that order, so a run could not reproduce its numbers. There is a config hook for the sampler
   (``trainer.v1.sampler.custom_sampler``), but verl builds a custom sampler without its group-filter and
   refill arguments. Patch: the batch verl built is put in :mod:`verl_ext.batch_order`'s canonical order
   (prompt groups as submitted, then session, then output index); which trajectories it holds is unchanged.
   Applied when verl imports the module, like patch 3.

5. ``agent_loop_construction`` -- ``verl/experimental/agent_loop/agent_loop.py``
   (``AgentLoopWorker._run_agent_loop``) builds a new agent loop for every response with
   ``hydra.utils.instantiate(config=registry entry, **8 keyword arguments)``; Hydra first merges the arguments
   into an OmegaConf config, ~4 ms of the agent-loop worker's CPU per response (a sixth of it on the tiny
   model, on the critical path of every CPU step). Patch: the module's ``hydra`` becomes
   :class:`DirectAgentLoopConstruction`, which calls the class itself when the registry entry is only
   ``{"_target_": class path}`` (what Hydra does for it, same arguments) and hands every other entry (an
   agent-loop config file's extra fields) to Hydra. Performance only. Applied when verl imports the module.
"""

from __future__ import annotations

import functools
import inspect
import types
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import torch.distributed

from verl_ext.batch_order import order_batch
from verl_ext.import_hooks import CPU_PLATFORM, OnImport, when_imported


@dataclass
class Patch:
    name: str
    verl_location: str
    reason: str
    # patches (given the module it waits for, if any) and returns the function that removes it
    apply: Callable[[Any], Callable[[], None]]
    waits_for: Optional[str] = None  # the module whose import applies it; None: applied at once

    def install(self) -> Callable[[], None]:
        """Apply it now, or when verl imports :attr:`waits_for`; returns the undo."""
        if self.waits_for is None:
            return self.apply(None)
        return patch_when_imported(self.waits_for, self.apply)

    def on_import(self) -> OnImport:
        """The wiring row of a patch that waits for an import."""
        return OnImport(self.waits_for, f"CPU patch {self.name}", self.apply, CPU_PLATFORM)


def deduplicate_backend(backend: Any) -> Any:
    """``"cpu:gloo,cpu:gloo"`` -> ``"cpu:gloo"``: drop exact repeats of a ``device:backend`` entry."""
    if not isinstance(backend, str) or "," not in backend:
        return backend
    entries: list[str] = []
    for entry in (part.strip() for part in backend.split(",")):
        if entry and entry not in entries:
            entries.append(entry)
    return ",".join(entries)


def _patch_duplicate_gloo_backend(_module: Any = None) -> Callable[[], None]:
    original = torch.distributed.init_process_group

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any):
        if args:
            args = (deduplicate_backend(args[0]),) + tuple(args[1:])
        elif "backend" in kwargs:
            kwargs["backend"] = deduplicate_backend(kwargs["backend"])
        return original(*args, **kwargs)

    init_process_group.__verl_ext_patch__ = "duplicate_gloo_backend"
    torch.distributed.init_process_group = init_process_group

    def remove() -> None:
        torch.distributed.init_process_group = original

    return remove


def _patch_unpinned_cpu_offload(_module: Any = None) -> Callable[[], None]:
    from torch.distributed.fsdp import CPUOffloadPolicy

    original = CPUOffloadPolicy.__init__

    @functools.wraps(original)
    def __init__(self, pin_memory: bool = True) -> None:  # noqa: N807
        original(self, pin_memory=False)

    __init__.__verl_ext_patch__ = "unpinned_cpu_offload"
    CPUOffloadPolicy.__init__ = __init__

    def remove() -> None:
        CPUOffloadPolicy.__init__ = original

    return remove


CPU_REPLAY_POLL_INTERVAL = 0.05
REPLAY_BUFFER_MODULE = "verl.trainer.ppo.v1.replay_buffer"


def patch_when_imported(module_name: str, apply: Callable[[Any], Callable[[], None]]) -> Callable[[], None]:
    """Patch ``module_name`` now if it is imported, else as soon as it is: ``apply(module)`` patches it and returns
    what undoes that. Returns the undo of both (stop waiting for the import; restore what ``apply`` changed)."""
    undo: list[Callable[[], None]] = []
    stop_waiting = when_imported(module_name, lambda module: undo.append(apply(module)))

    def remove() -> None:
        stop_waiting()
        while undo:
            undo.pop()()

    return remove


def _patch_replay_buffer_poll_interval(module: Any) -> Callable[[], None]:
    replay_buffer = module.ReplayBuffer
    original = replay_buffer.__init__
    parameter = inspect.signature(original).parameters.get("poll_interval")
    if parameter is None:
        raise RuntimeError(f"{REPLAY_BUFFER_MODULE}.ReplayBuffer.__init__ has no poll_interval: remove this patch")

    @functools.wraps(original)
    def __init__(self, *args: Any, poll_interval: float = CPU_REPLAY_POLL_INTERVAL, **kwargs: Any) -> None:  # noqa: N807
        original(self, *args, poll_interval=poll_interval, **kwargs)

    __init__.__verl_ext_patch__ = "replay_buffer_poll_interval"
    replay_buffer.__init__ = __init__
    return lambda: setattr(replay_buffer, "__init__", original)


MATERIALIZE_PARAMETERS = ["self", "partition_id", "selected_prompt_uids", "partition_snapshot"]


def _patch_batch_order(module: Any) -> Callable[[], None]:
    replay_buffer = module.ReplayBuffer
    original = replay_buffer._materialize_batch
    parameters = list(inspect.signature(original).parameters)
    if parameters != MATERIALIZE_PARAMETERS:
        raise RuntimeError(
            f"{REPLAY_BUFFER_MODULE}.ReplayBuffer._materialize_batch{tuple(parameters)} is not the method this "
            "patch wraps: re-check the batch_order patch"
        )

    @functools.wraps(original)
    def _materialize_batch(self, partition_id, selected_prompt_uids, partition_snapshot):
        batch = original(self, partition_id, selected_prompt_uids, partition_snapshot)
        # prompt groups in listing (= submission) order, from the snapshot verl just selected from
        return order_batch(batch, list(self.prompt_global_steps[partition_id]))

    _materialize_batch.__verl_ext_patch__ = "batch_order"
    replay_buffer._materialize_batch = _materialize_batch
    return lambda: setattr(replay_buffer, "_materialize_batch", original)


AGENT_LOOP_MODULE = "verl.experimental.agent_loop.agent_loop"
TARGET_KEY = "_target_"


@functools.lru_cache(maxsize=None)
def _agent_loop_class(path: str) -> type:
    from hydra.utils import get_class

    return get_class(path)


class DirectAgentLoopConstruction:
    """Stands for ``hydra`` in verl's agent-loop module (patch 5): ``utils.instantiate(config=entry, **kwargs)`` calls
    the entry's class with ``kwargs`` when the entry is only a class path, else it is Hydra's."""

    def __init__(self, hydra_module: Any):
        self.hydra = hydra_module
        self.utils = types.SimpleNamespace(instantiate=self.instantiate)

    def instantiate(self, config: Any, *args: Any, **kwargs: Any) -> Any:
        if args or not hasattr(config, "keys") or set(config.keys()) != {TARGET_KEY}:
            return self.hydra.utils.instantiate(config, *args, **kwargs)
        return _agent_loop_class(config[TARGET_KEY])(**kwargs)

    instantiate.__verl_ext_patch__ = "agent_loop_construction"


def _patch_agent_loop_construction(module: Any) -> Callable[[], None]:
    original = module.hydra
    module.hydra = DirectAgentLoopConstruction(original)
    return lambda: setattr(module, "hydra", original)


PATCHES = (
    Patch(
        name="duplicate_gloo_backend",
        verl_location="verl/utils/distributed.py: initialize_global_process_group_ray",
        reason='backend string "cpu:gloo,cpu:gloo" is rejected by torch',
        apply=_patch_duplicate_gloo_backend,
    ),
    Patch(
        name="unpinned_cpu_offload",
        verl_location="verl/workers/engine/fsdp/transformer_impl.py: _build_fsdp_module",
        reason="CPUOffloadPolicy(pin_memory=True) for the forward-only (reference) engine needs an NVIDIA driver",
        apply=_patch_unpinned_cpu_offload,
    ),
    Patch(
        name="replay_buffer_poll_interval",
        verl_location="verl/trainer/ppo/v1/trainer_base.py: _build_replay_buffer",
        reason="the trainer polls for finished rollouts every 2 s, with no config key; a CPU rollout takes ~0.1 s",
        apply=_patch_replay_buffer_poll_interval,
        waits_for=REPLAY_BUFFER_MODULE,
    ),
    Patch(
        name="batch_order",
        verl_location="verl/trainer/ppo/v1/replay_buffer.py: ReplayBuffer._materialize_batch",
        reason="a batch's responses come in the order workers finished them: a run cannot reproduce its numbers",
        apply=_patch_batch_order,
        waits_for=REPLAY_BUFFER_MODULE,
    ),
    Patch(
        name="agent_loop_construction",
        verl_location="verl/experimental/agent_loop/agent_loop.py: AgentLoopWorker._run_agent_loop",
        reason="Hydra builds each response's agent loop by merging 8 arguments into a config: ~4 ms a response",
        apply=_patch_agent_loop_construction,
        waits_for=AGENT_LOOP_MODULE,
    ),
)

# the patches that wait for verl to import a module, as rows of verl-ext's wiring (verl_ext.plugin.wiring)
ON_IMPORT = tuple(patch.on_import() for patch in PATCHES if patch.waits_for is not None)

_removers: dict[str, Callable[[], None]] = {}


def apply_cpu_patches() -> tuple[str, ...]:
    """Install every patch not yet installed in this process; returns the names now active."""
    for patch in PATCHES:
        if patch.name not in _removers:
            _removers[patch.name] = patch.install()
    return active_patches()


def remove_cpu_patches() -> None:
    """Restore the original torch objects (tests use this to see verl's unpatched behaviour)."""
    for name in list(_removers):
        _removers.pop(name)()


def active_patches() -> tuple[str, ...]:
    return tuple(name for name in (patch.name for patch in PATCHES) if name in _removers)
