"""Which checkpoint-engine backends a run can name (``actor_rollout_ref.rollout.checkpoint_engine.backend``).

verl picks the engine that moves weights from the actor to rollout engines outside its processes from
``verl.checkpoint_engine.CheckpointEngineRegistry``. verl's package registers its engines only when their
transport imports (``nccl`` and ``nixl`` need cupy, ``mooncake`` its library, ...) and records the failures;
verl-ext registers ``gloo`` (:mod:`verl_ext.cpu_runtime.checkpoint_engine`); ``custom_backend_module`` may import
more. :func:`backend_status` says which of three a name is -- registered here; one of verl's own engines
whose module does not import on this machine (a GPU config checked on a machine without cupy); unknown --
so the driver's checks can refuse a misspelt backend before Ray starts and name the registered ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

BACKEND_KEY = "actor_rollout_ref.rollout.checkpoint_engine.backend"
CUSTOM_MODULE_KEY = "actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module"
COLOCATED_BACKEND = "naive"  # verl's in-process push, for a rollout inside the actor's own workers
GPU_BACKEND = "nccl"  # verl's NCCL broadcast: what the run scripts pick for an engine on its own GPUs
CPU_BACKEND = "gloo"  # verl-ext's gloo broadcast (verl_ext.cpu_runtime.checkpoint_engine): the CPU backend's

# a registration in verl's engine modules: @CheckpointEngineRegistry.register("name")
_REGISTRATION = re.compile(r"""CheckpointEngineRegistry\.register\(\s*["']([^"']+)["']\s*\)""")

REGISTERED, NOT_IMPORTABLE_HERE, UNKNOWN = "registered", "not importable here", "unknown"


@dataclass(frozen=True)
class BackendStatus:
    name: str
    status: str  # REGISTERED, NOT_IMPORTABLE_HERE or UNKNOWN
    registered: tuple[str, ...]  # every backend registered in this process
    import_error: Optional[str] = None  # why verl's module for it did not import (NOT_IMPORTABLE_HERE)


def verl_bundled_backends() -> dict[str, list[str]]:
    """Backend name -> the modules of ``verl.checkpoint_engine`` that register it (read from their source, so a
    name whose module cannot import here is still known)."""
    import importlib.util

    spec = importlib.util.find_spec("verl.checkpoint_engine")
    package = Path(spec.origin).parent
    bundled: dict[str, list[str]] = {}
    for path in sorted(package.glob("*.py")):
        for name in _REGISTRATION.findall(path.read_text(encoding="utf-8")):
            bundled.setdefault(name, []).append(path.stem)
    return bundled


def import_custom_backend_module(module: Optional[str]) -> None:
    """Import ``custom_backend_module`` as verl's workers do (it may register backends); a ConfigError if it fails."""
    if not module:
        return
    from verl.utils.import_utils import import_external_libs

    from verl_ext.config_values import ConfigError

    try:
        import_external_libs(module)
    except Exception as error:  # an ImportError, or whatever the module raises at import
        raise ConfigError(f"{CUSTOM_MODULE_KEY}={module!r} does not import: {type(error).__name__}: {error}") from error


def backend_status(name: str) -> BackendStatus:
    """Where ``name`` stands in this process (import ``custom_backend_module`` first)."""
    from verl.checkpoint_engine import CheckpointEngineRegistry

    registered = tuple(sorted(CheckpointEngineRegistry._registry))
    if name in registered:
        return BackendStatus(name, REGISTERED, registered)
    modules = verl_bundled_backends().get(name, [])
    errors = [f"{module}: {CheckpointEngineRegistry._import_errors[module]}" for module in modules
              if module in CheckpointEngineRegistry._import_errors]
    if errors:
        return BackendStatus(name, NOT_IMPORTABLE_HERE, registered, "; ".join(errors))
    return BackendStatus(name, UNKNOWN, registered)


class _Tolerance:
    """What :func:`tolerate_unimportable_backends` collected: one note per backend it let through."""

    def __init__(self) -> None:
        self.notes: list[str] = []


_tolerance: Optional[_Tolerance] = None


class tolerate_unimportable_backends:  # noqa: N801 -- used as a context manager, like contextlib's
    """Within the block, one of verl's own backends whose module does not import here is a note, not an error.

    The dry run uses it: it checks GPU configs on a machine without their transports (``nccl`` needs cupy).
    The driver of a real run does not: there the run starts from this machine, and the backend must import.
    """

    def __enter__(self) -> _Tolerance:
        global _tolerance
        self._previous, _tolerance = _tolerance, _Tolerance()
        return _tolerance

    def __exit__(self, *exc_info) -> None:
        global _tolerance
        _tolerance = self._previous


def unimportable_backend_tolerated(note: str) -> bool:
    """Record ``note`` and return True inside :func:`tolerate_unimportable_backends`; False outside it."""
    if _tolerance is None:
        return False
    _tolerance.notes.append(note)
    return True
