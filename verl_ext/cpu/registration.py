"""Register the CPU backend with verl's registries (called from :mod:`verl_ext.plugin` in every process).

- platform ``cpu`` in ``verl.plugin.platform.PlatformRegistry`` (public). It is never auto-detected;
  ``VERL_PLATFORM=cpu`` selects it, so registering it on a GPU host changes nothing there.
- rollout ``cpu``: the replica class in ``verl.workers.rollout.replica.RolloutReplicaRegistry`` (public)
  and the trainer-side adapter in ``verl.workers.rollout.base._ROLLOUT_REGISTRY`` (a private dict: verl
  0.9.1 has no function to add to it; ``tests/cpu/test_registration.py`` fails if that changes).
- checkpoint-engine backend ``gloo`` (:mod:`verl_ext.cpu.checkpoint_engine`) in
  ``verl.checkpoint_engine.CheckpointEngineRegistry`` (public), when and wherever verl imports that registry
  (its module imports verl's rollout stack, seconds; a process that never moves weights never pays it);
- the patches of :mod:`verl_ext.cpu.patches`, only when the CPU platform is selected.

Nothing here imports verl at module import time, nor a verl_ext module that does: verl runs this while
``import verl`` is still executing (see :class:`verl_ext.cpu.platform.CPUPlatformMethods`).
"""

from __future__ import annotations

import wrapt

from verl_ext.cpu.platform import PLATFORM_NAME, cpu_platform_class, is_cpu_platform_selected

ROLLOUT_NAME = "cpu"
SERVER_ADAPTER_PATH = "verl_ext.cpu.server_adapter.CPUServerAdapter"
CHECKPOINT_ENGINE_MODULE = "verl.checkpoint_engine.base"


def _register_checkpoint_engine(_base_module) -> None:
    # importing the module registers its backend (and refuses to replace another class of that name)
    import verl_ext.cpu.checkpoint_engine  # noqa: F401


def _load_cpu_rollout_replica() -> type:
    from verl_ext.cpu.rollout_replica import CPURolloutReplica

    return CPURolloutReplica


def register_cpu_backend() -> None:
    """Register the ``cpu`` platform and rollout; install the CPU patches when ``VERL_PLATFORM=cpu``."""
    from verl.plugin.platform import PlatformRegistry
    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    platform_class = cpu_platform_class()
    if PlatformRegistry.get(PLATFORM_NAME) is not platform_class:
        PlatformRegistry.register(platform=PLATFORM_NAME)(platform_class)
    RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_cpu_rollout_replica)
    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = SERVER_ADAPTER_PATH
    wrapt.register_post_import_hook(_register_checkpoint_engine, CHECKPOINT_ENGINE_MODULE)

    if is_cpu_platform_selected():
        from verl_ext.cpu.patches import apply_cpu_patches

        apply_cpu_patches()
