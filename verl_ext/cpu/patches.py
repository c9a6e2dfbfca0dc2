"""The two places where verl 0.9.1 leaves no extension point for a CPU run, and the minimal patch for each.

Both patches change a torch object, not a verl file; both are installed only when the CPU platform is
selected (``VERL_PLATFORM=cpu``, see :func:`verl_ext.cpu.registration.register_cpu_backend`) and both are
guarded by tests (``tests/cpu/test_patches.py``) that fail when a verl or torch upgrade makes them wrong
or unnecessary.

1. ``duplicate_gloo_backend`` -- ``verl/utils/distributed.py`` (``initialize_global_process_group_ray``)
   builds the backend string ``f"cpu:gloo,{device}:{backend}"``, which on the CPU platform is
   ``"cpu:gloo,cpu:gloo"``; torch rejects the duplicated device ("Duplicate device type cpu").
   Patch: ``torch.distributed.init_process_group`` drops exact duplicate ``device:backend`` entries.

2. ``unpinned_cpu_offload`` -- ``verl/workers/engine/fsdp/transformer_impl.py`` (``_build_fsdp_module``)
   always builds ``CPUOffloadPolicy(pin_memory=True)`` for a forward-only FSDP2 engine (the reference
   policy); pinning host memory needs an NVIDIA driver. Patch: ``CPUOffloadPolicy`` never pins
   (on a CPU the parameters already live in host memory; there is nothing to pin for).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed


@dataclass
class Patch:
    name: str
    verl_location: str
    reason: str
    install: Callable[[], Callable[[], None]]  # installs the patch, returns the function that removes it


def deduplicate_backend(backend: Any) -> Any:
    """``"cpu:gloo,cpu:gloo"`` -> ``"cpu:gloo"``: drop exact repeats of a ``device:backend`` entry."""
    if not isinstance(backend, str) or "," not in backend:
        return backend
    entries: list[str] = []
    for entry in (part.strip() for part in backend.split(",")):
        if entry and entry not in entries:
            entries.append(entry)
    return ",".join(entries)


def _install_duplicate_gloo_backend() -> Callable[[], None]:
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


def _install_unpinned_cpu_offload() -> Callable[[], None]:
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


PATCHES = (
    Patch(
        name="duplicate_gloo_backend",
        verl_location="verl/utils/distributed.py: initialize_global_process_group_ray",
        reason='backend string "cpu:gloo,cpu:gloo" is rejected by torch',
        install=_install_duplicate_gloo_backend,
    ),
    Patch(
        name="unpinned_cpu_offload",
        verl_location="verl/workers/engine/fsdp/transformer_impl.py: _build_fsdp_module",
        reason="CPUOffloadPolicy(pin_memory=True) for the forward-only (reference) engine needs an NVIDIA driver",
        install=_install_unpinned_cpu_offload,
    ),
)

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
