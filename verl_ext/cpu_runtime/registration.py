"""Register the CPU backend with verl's registries (called from :mod:`verl_ext.plugin` in every process).

- platform ``cpu`` in ``verl.plugin.platform.PlatformRegistry`` (public), at once: verl resolves its platform
  on first use, and the registry module is already loaded by ``import verl``. It is never auto-detected;
  ``VERL_PLATFORM=cpu`` selects it, so registering it on a GPU host changes nothing there.
- rollout ``cpu``: the replica class in ``verl.workers.rollout.replica.RolloutReplicaRegistry`` (public)
  and the trainer-side adapter in ``verl.workers.rollout.base._ROLLOUT_REGISTRY`` (a private dict: verl
  0.9.1 has no function to add to it; listed in :mod:`verl_ext.verl_internals`). Each is added when, and in
  whichever process, verl imports that module: verl's rollout package costs about a CPU-second to import,
  and most processes that ``import verl`` never use it (verl looks a rollout up only through these modules,
  so it always finds ``cpu`` there);
- checkpoint-engine backend ``gloo`` (:mod:`verl_ext.cpu_runtime.checkpoint_engine`) in
  ``verl.checkpoint_engine.CheckpointEngineRegistry`` (public), likewise when verl imports that registry;
- the rendezvous scheme of :mod:`verl_ext.cpu_runtime.loopback_store` (torch's public
  ``register_rendezvous_handler``), at once: only a ``DIST_INIT_METHOD`` that names it uses it;
- the patches of :mod:`verl_ext.cpu_runtime.patches`, only when the CPU platform is selected.

Nothing here imports verl's rollout stack, nor a verl_ext module that does: verl runs this while
``import verl`` is still executing (see :class:`verl_ext.cpu_runtime.platform.CPUPlatformMethods`).
"""

from __future__ import annotations

from verl_ext.cpu_runtime.loopback_store import register_scheme
from verl_ext.cpu_runtime.platform import PLATFORM_NAME, cpu_platform_class, is_cpu_platform_selected
from verl_ext.import_hooks import OnImport, install

ROLLOUT_NAME = "cpu"
SERVER_ADAPTER_PATH = "verl_ext.cpu_runtime.server_adapter.CPUServerAdapter"


def _register_rollout_adapter(rollout_base) -> None:
    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = SERVER_ADAPTER_PATH


def _register_rollout_replica(replica_module) -> None:
    replica_module.RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_cpu_rollout_replica)


def _register_checkpoint_engine(_base_module) -> None:
    # importing the module registers its backend (and refuses to replace another class of that name)
    import verl_ext.cpu_runtime.checkpoint_engine  # noqa: F401


def _load_cpu_rollout_replica() -> type:
    from verl_ext.cpu_runtime.rollout_replica import CPURolloutReplica

    return CPURolloutReplica


# what is registered into which verl module when (and wherever) verl imports it; each module is listed in
# verl_ext.verl_internals (kind "import hook"), which verl-ext doctor checks
ON_IMPORT = (
    OnImport("verl.workers.rollout.base", "the cpu rollout's trainer-side adapter, in _ROLLOUT_REGISTRY",
             _register_rollout_adapter),
    OnImport("verl.workers.rollout.replica", "the cpu rollout replica, in RolloutReplicaRegistry", _register_rollout_replica),
    OnImport("verl.checkpoint_engine.base", "the gloo checkpoint engine, in CheckpointEngineRegistry",
             _register_checkpoint_engine),
)


def register_cpu_backend() -> None:
    """Register the ``cpu`` platform now, the rollout and the checkpoint engine when verl imports their
    registries, and the loopback rendezvous now; install the CPU patches when ``VERL_PLATFORM=cpu``."""
    from verl.plugin.platform import PlatformRegistry

    platform_class = cpu_platform_class()
    if PlatformRegistry.get(PLATFORM_NAME) is not platform_class:
        PlatformRegistry.register(platform=PLATFORM_NAME)(platform_class)
    install(ON_IMPORT)
    register_scheme()

    if is_cpu_platform_selected():
        from verl_ext.cpu_runtime.patches import apply_cpu_patches

        apply_cpu_patches()
