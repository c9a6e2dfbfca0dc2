"""The settings of the math equivalence check: ``VERL_EXT_MATH_*`` variables, each checked with its allowed values.

A bad value here would otherwise surface on every reward call (every correct answer scored 0, or a
traceback per response), so :func:`from_environment` reads every ``VERL_EXT_MATH_*`` variable at once
and raises :class:`MathSettingsError` naming the variable and what it allows. A name that starts with
``VERL_EXT_MATH_`` but is none of these (a typo such as ``VERL_EXT_MATH_TIMEOUT``) is an error too,
since it would be silently ignored.

=============================  ==============  =====================================================
variable                       default         allowed
=============================  ==============  =====================================================
``VERL_EXT_MATH_TIMEOUT_S``    5               seconds for one check, a number in (0, 600]
``VERL_EXT_MATH_STARTUP_S``    10              seconds a call may wait (for a child to start, or in
                                               line) before its budget starts shrinking, in (0, 600]
``VERL_EXT_MATH_WORKERS``      min(4, CPUs)    an integer in [1, 64]
``VERL_EXT_MATH_SANDBOX``      ``process``     ``process`` or ``thread``
``VERL_EXT_MATH_MEMORY_MB``    4096            an integer in [512, 1048576] (a child takes ~70 MB to
                                               import sympy; a lower cap leaves sympy no room to work)
=============================  ==============  =====================================================

The upper bounds are finite on purpose: an infinite budget turns one runaway check into a reward call
that never returns.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Mapping

PREFIX = "VERL_EXT_MATH_"
TIMEOUT_ENV = "VERL_EXT_MATH_TIMEOUT_S"
STARTUP_ENV = "VERL_EXT_MATH_STARTUP_S"
WORKERS_ENV = "VERL_EXT_MATH_WORKERS"
SANDBOX_ENV = "VERL_EXT_MATH_SANDBOX"
MEMORY_ENV = "VERL_EXT_MATH_MEMORY_MB"
KNOWN_VARIABLES = (TIMEOUT_ENV, STARTUP_ENV, WORKERS_ENV, SANDBOX_ENV, MEMORY_ENV)

SANDBOXES = ("process", "thread")
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_STARTUP_S = 10.0
MAX_SECONDS = 600.0
MAX_WORKERS = 64
DEFAULT_MEMORY_MB = 4096
MEMORY_RANGE_MB = (512, 1 << 20)


class MathSettingsError(ValueError):
    """A math-check setting (environment variable, ``configure`` argument or ``math_timeout_s``) is invalid."""


@dataclass(frozen=True)
class MathSettings:
    timeout_s: float = DEFAULT_TIMEOUT_S
    startup_allowance_s: float = DEFAULT_STARTUP_S
    workers: int = 1
    sandbox: str = "process"
    memory_mb: int = DEFAULT_MEMORY_MB


def seconds(name: str, value: Any) -> float:
    """``value`` as seconds in (0, MAX_SECONDS]; anything else (0, negative, nan, inf, text) raises."""
    allowed = f"expected seconds, a number in (0, {MAX_SECONDS:g}]"
    if isinstance(value, bool):
        raise MathSettingsError(f"{name}={value!r}: {allowed}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise MathSettingsError(f"{name}={value!r}: {allowed}") from None
    if not (math.isfinite(number) and 0 < number <= MAX_SECONDS):
        raise MathSettingsError(f"{name}={value!r}: {allowed}")
    return number


def integer(name: str, value: Any, low: int, high: int) -> int:
    """``value`` as an integer in [low, high] (``"4"`` and ``4`` pass; ``4.5``, ``"four"``, ``True`` do not)."""
    allowed = f"expected an integer in [{low}, {high}]"
    if isinstance(value, bool):
        raise MathSettingsError(f"{name}={value!r}: {allowed}")
    try:
        number = int(value.strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError, OverflowError):
        raise MathSettingsError(f"{name}={value!r}: {allowed}") from None
    truncated = not isinstance(value, str) and number != value  # 2.5 -> 2
    if truncated or not low <= number <= high:
        raise MathSettingsError(f"{name}={value!r}: {allowed}")
    return number


def sandbox(name: str, value: Any) -> str:
    if value not in SANDBOXES:
        raise MathSettingsError(f"{name}={value!r}: expected one of {', '.join(SANDBOXES)}")
    return value


def from_environment(environ: Mapping[str, str] | None = None) -> MathSettings:
    """Every ``VERL_EXT_MATH_*`` variable, checked (see the module docstring); defaults for those unset."""
    environ = os.environ if environ is None else environ
    unknown = sorted(name for name in list(environ) if name.startswith(PREFIX) and name not in KNOWN_VARIABLES)
    if unknown:
        raise MathSettingsError(
            f"unknown environment variable {unknown[0]}={environ[unknown[0]]!r}: "
            f"the math reward reads only {', '.join(KNOWN_VARIABLES)}"
        )
    defaults = MathSettings(workers=min(4, os.cpu_count() or 1))

    def read(name: str, check, default):
        value = environ.get(name)
        return default if value is None else check(name, value.strip())

    return MathSettings(
        timeout_s=read(TIMEOUT_ENV, seconds, defaults.timeout_s),
        startup_allowance_s=read(STARTUP_ENV, seconds, defaults.startup_allowance_s),
        workers=read(WORKERS_ENV, lambda n, v: integer(n, v, 1, MAX_WORKERS), defaults.workers),
        sandbox=read(SANDBOX_ENV, sandbox, defaults.sandbox),
        memory_mb=read(MEMORY_ENV, lambda n, v: integer(n, v, *MEMORY_RANGE_MB), defaults.memory_mb),
    )
