"""The one error type and value checks of verl-ext's configuration keys (no verl import: the staleness
schedule and the lab use them too).

Every message has one shape, ``KEY=VALUE is invalid: allowed values are ALLOWED.`` followed by why, so a
user sees the dotted key to change and what it accepts. Numbers are checked for type and finiteness before
their range: ``nan`` fails every comparison, so a range check alone lets it through.
"""

from __future__ import annotations

import math
from typing import Any


class ConfigError(ValueError):
    """A verl-ext configuration value is out of range or inconsistent with another one."""


def reject(key: str, value: Any, allowed: str, why: str = "") -> None:
    """Raise :class:`ConfigError` naming ``key``, its value and what it accepts."""
    message = f"{key}={value!r} is invalid: allowed values are {allowed}."
    if why:
        message += f" {why}"
    raise ConfigError(message)


def is_int(value: Any) -> bool:
    """An integer that is not a bool (YAML's ``true`` is not a count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """An int or float, not a bool, not nan or +-inf."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def require_int(key: str, value: Any, minimum: int, why: str = "", when: str = "") -> int:
    """An integer (not a bool) >= ``minimum``; ``when`` words the condition under which that is required
    (``"with trainer.v1.delayed_sync.zero_variance_masking=true"``), after the allowed values."""
    if not is_int(value) or value < minimum:
        reject(key, value, f"an integer >= {minimum}" + (f" {when}" if when else ""), why)
    return value


def require_bool(key: str, value: Any, why: str = "") -> bool:
    if not isinstance(value, bool):
        reject(key, value, "true or false", why)
    return value


def require_number(key: str, value: Any, allowed: str, low: float | None = None, high: float | None = None,
                   low_open: bool = False, why: str = "") -> float:
    """A finite number within [low, high] (``(low, high]`` with ``low_open``); ``allowed`` words the range."""
    if not is_finite_number(value):
        reject(key, value, allowed, why)
    if low is not None and (value <= low if low_open else value < low):
        reject(key, value, allowed, why)
    if high is not None and value > high:
        reject(key, value, allowed, why)
    return float(value)
