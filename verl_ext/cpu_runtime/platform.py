"""The ``cpu`` platform: verl's device abstraction answered by the host CPU.

verl asks its platform (``verl.plugin.platform.get_platform()``) for the device name, the torch device
module, the collective backend and the Ray resource that places a worker. This platform answers so that
verl's real training loop runs on a machine without an accelerator:

- ``device_name == "cpu"`` and ``current_device() == "cpu"``: verl passes the current device to
  ``device_id=``, ``.to()`` and ``torch.device()``, all of which accept the string ``"cpu"``.
- ``communication_backend_name() == "gloo"``: the only torch collective backend that runs on CPU.
- ``ray_resource_name() == "GPU"``: verl's resource pools count only accelerator resources, so a CPU run
  starts Ray with logical GPUs (``ray_init.num_gpus``); Ray does not check that they exist.
- ``device_module`` is :data:`cpu_device_module`, ``torch.cpu`` plus the calls verl makes on
  ``torch.cuda`` that ``torch.cpu`` lacks (``empty_cache``, ``mem_get_info``, peak-memory counters, ...).
- ``is_platform_available()`` is ``False``: verl's auto-detection never picks this platform; it is
  chosen only explicitly with ``VERL_PLATFORM=cpu``, so registering it on a GPU host changes nothing.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import types
from contextlib import contextmanager
from typing import Any, Optional

import psutil
import torch

PLATFORM_NAME = "cpu"


def _resident_bytes() -> int:
    """Resident set size of this process, in bytes (what "memory allocated" means on a CPU)."""
    return psutil.Process(os.getpid()).memory_info().rss


def _peak_resident_bytes() -> int:
    """Peak resident set size of this process, in bytes (``ru_maxrss`` is in KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _build_cpu_device_module() -> types.ModuleType:
    """``torch.cpu`` extended with the ``torch.cuda`` calls verl makes through ``get_torch_device()``.

    Memory figures are the process's resident memory (psutil); calls with no CPU meaning (cache release,
    IPC collection, memory fractions) do nothing.
    """
    module = types.ModuleType("verl_ext_cpu_device", "torch.cpu with the torch.cuda calls verl uses")
    for name in dir(torch.cpu):
        if not name.startswith("_"):
            setattr(module, name, getattr(torch.cpu, name))

    def no_op(*args: Any, **kwargs: Any) -> None:
        return None

    module.empty_cache = no_op
    module.ipc_collect = no_op
    module.set_per_process_memory_fraction = no_op
    module.reset_peak_memory_stats = no_op
    module.mem_get_info = lambda device=None: (psutil.virtual_memory().available, psutil.virtual_memory().total)
    module.memory_allocated = lambda device=None: _resident_bytes()
    module.memory_reserved = lambda device=None: _resident_bytes()
    module.max_memory_allocated = lambda device=None: _peak_resident_bytes()
    module.max_memory_reserved = lambda device=None: _peak_resident_bytes()
    module.get_rng_state = lambda device=None: torch.get_rng_state()
    module.set_rng_state = lambda state, device=None: torch.set_rng_state(state)
    module.manual_seed = torch.manual_seed
    module.manual_seed_all = torch.manual_seed
    module.get_device_name = lambda device=None: "cpu"
    module.is_available = lambda: True
    return module


cpu_device_module = _build_cpu_device_module()


class CPUPlatformMethods:
    """The CPU platform's answers; :func:`cpu_platform_class` combines them with verl's ``PlatformBase``.

    Kept free of a verl base class so that importing this module does not import verl: verl imports
    ``verl_ext.plugin`` while ``import verl`` runs, and a module that imported verl at import time would
    be half-initialised when the plugin asks for it.
    """

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return cpu_device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: a CPU run is requested with VERL_PLATFORM=cpu.
        return False

    def current_device(self) -> str:  # type: ignore[override]
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: Optional[int] = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[Optional[int], Optional[int]]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray writes the ids of the logical GPUs it hands an actor here; verl reads it for LOCAL_RANK.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


_cpu_platform_class: Optional[type] = None


def cpu_platform_class() -> type:
    """``CPUPlatform``: :class:`CPUPlatformMethods` on verl's ``PlatformBase`` (built once, on first use)."""
    global _cpu_platform_class
    if _cpu_platform_class is None:
        from verl.plugin.platform import PlatformBase

        _cpu_platform_class = type(
            "CPUPlatform",
            (CPUPlatformMethods, PlatformBase),
            {"__doc__": "verl platform for a host without an accelerator (see verl_ext.cpu_runtime.platform).",
             "__module__": __name__},
        )
    return _cpu_platform_class


def is_cpu_platform_selected() -> bool:
    """True when this process runs verl on the CPU platform (``VERL_PLATFORM=cpu``).

    Reads the environment rather than ``get_platform()`` so that asking does not fix verl's platform
    singleton before verl itself resolves it.
    """
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME


_hold_lock = threading.Lock()
_holders = 0
_held_from: Any = None


@contextmanager
def hold_cpu_platform():
    """Within the block, this process's verl platform is the CPU one, whatever it had resolved to (or not yet);
    the previous one comes back when the last holder leaves (nested and concurrent holders share one hold).

    verl resolves its platform once per process. A CPU run's driver resolves the CPU platform (``VERL_PLATFORM=cpu``,
    the CPU profile's environment); a process that checks or runs a CPU run in itself (the launcher's check,
    :meth:`verl_ext.cpu.backend.CPUBackend.platform`; the in-process session, :mod:`verl_ext.cpu.ray_session`) must
    hold the same one, else ``auto_set_device`` turns ``trainer.device`` into ``cuda`` and the CPU-topology checks
    are skipped. verl's ``set_platform`` cannot restore "not resolved yet" (None): its private singleton is written.
    """
    global _holders, _held_from
    from verl.plugin.platform import platform_manager, set_platform

    with _hold_lock:
        if _holders == 0:
            _held_from = platform_manager._current_platform
            if not isinstance(_held_from, cpu_platform_class()):
                platform_manager._current_platform = None
                set_platform(cpu_platform_class()())
        _holders += 1
    try:
        yield
    finally:
        with _hold_lock:
            _holders -= 1
            if _holders == 0:
                platform_manager._current_platform = _held_from
                _held_from = None
