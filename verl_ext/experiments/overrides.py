"""Hydra override lists: the key an override sets, and merging lists so that a key set later wins.

Every layer that composes a run (profile, algorithm, setting, the CPU or GPU smoke profile, the user's own
overrides) produces a list of ``key=value`` strings; :func:`merge_overrides` joins them in that order.
"""

from __future__ import annotations

from typing import Iterable


def override_key(override: str) -> str:
    """``"+a.b=1"`` -> ``"a.b"``: the config key an override sets (without ``+``, ``++`` or ``~``)."""
    return override.split("=", 1)[0].lstrip("+~")


def merge_overrides(*groups: Iterable[str]) -> list[str]:
    """Concatenate override lists; a key set again later replaces the earlier entry (last one wins).

    A later plain ``key=value`` for a key an earlier group added with ``+key=...`` keeps the ``+`` (the key
    is not in verl's config, so Hydra needs it).
    """
    merged: dict[str, str] = {}
    for group in groups:
        for override in group:
            key = override_key(override)
            if key in merged and merged[key].startswith("+") and not override.startswith(("+", "~")):
                override = "+" + override
            merged.pop(key, None)
            merged[key] = override
    return list(merged.values())


def hydra_list(items: Iterable[str]) -> str:
    """``["console", "file"]`` -> ``"[console,file]"`` (a Hydra list value)."""
    return "[" + ",".join(items) + "]"
