"""The warnings verl's imports print about optional engines that a verl-ext run does not use, and how to silence them.

``import verl.workers.engine`` tries each of verl's optional training engines and warns for each one that is not
installed (torchtitan, VeOmni, NeMo Automodel, MindSpeed, Megatron); Megatron-Core, which verl imports when it is
installed, warns that Transformer Engine and Apex are not. Every verl process that builds a worker does this
import: on the CPU backend the driver, the TaskRunner and every Ray worker, about 40 lines per run that say nothing
about the run (it trains with verl's FSDP engine). Each entry of :data:`OPTIONAL_ENGINE_WARNINGS` is the start of
one such message (matched case-insensitively, as Python's ``-W`` option matches), all of category ``UserWarning``.

Two ways to apply them, the same list:

- :func:`python_warnings`: a ``PYTHONWARNINGS`` value, for a child process and the Ray processes it starts (they
  inherit the environment, and Python reads the variable when each of them starts): the CPU profile's environment
  (:func:`verl_ext.cpu.profile.cpu_environment`);
- :func:`ignore_optional_engine_warnings`: the same filters in this process (``verl-ext doctor``).

Any other warning is shown as before. Importing this module imports nothing of verl.
"""

from __future__ import annotations

import re
import warnings
from typing import Optional

CATEGORY = "UserWarning"
# verl/workers/engine/__init__.py, one per optional engine; megatron/core/... (mixed_precision, optimizer, clip_grads,
# models/backends, models/gpt/gpt_layer_specs)
OPTIONAL_ENGINE_WARNINGS = (
    "torchtitan engine is not available",
    "veomni engine is not available",
    "automodel engine is not available",
    "mindspeed engine is not available",
    "megatron engine is not available",
    "Transformer Engine and Apex are not installed",
    "Apex is not installed",
)


def _entries(value: Optional[str]) -> list[str]:
    return [entry.strip() for entry in (value or "").split(",") if entry.strip()]


def python_warnings(existing: Optional[str] = None) -> str:
    """``PYTHONWARNINGS`` = the ``existing`` value's entries (kept, each once), then one ``ignore`` entry per message of
    :data:`OPTIONAL_ENGINE_WARNINGS` (a later entry wins in Python, so ``existing`` cannot turn them back on, and
    every other warning keeps the action ``existing`` gives it)."""
    entries = _entries(existing)
    for message in OPTIONAL_ENGINE_WARNINGS:
        entry = f"ignore:{message}:{CATEGORY}"
        if entry not in entries:
            entries.append(entry)
    return ",".join(entries)


def ignore_optional_engine_warnings() -> None:
    """Install the filters of :data:`OPTIONAL_ENGINE_WARNINGS` in this process (before verl's engines are imported)."""
    for message in OPTIONAL_ENGINE_WARNINGS:
        warnings.filterwarnings("ignore", message=re.escape(message), category=UserWarning)
