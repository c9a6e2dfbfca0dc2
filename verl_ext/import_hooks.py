"""verl-ext's one way of acting on a verl module when verl imports it, and the record of each such wiring.

verl loads plugins on ``import verl`` in every process, while its registries (losses, rollouts, checkpoint engines,
trainer modes, agent loops, tool parsers) live in modules that cost seconds to import and that most processes never
import. So verl-ext registers into each of them, or patches it, at the moment verl imports that module, in
whichever process that is: :func:`when_imported` (wrapt's post-import hooks: any import path; at once when the
module is imported already). Each such wiring is an :class:`OnImport` row; :func:`verl_ext.plugin.wiring` gathers
every row in one table, which ``verl-ext doctor`` prints and docs/architecture.md shows.

Imports neither verl nor torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Iterable

import wrapt

EVERY_PROCESS = "every process"
CPU_PLATFORM = "VERL_PLATFORM=cpu"


@dataclass(frozen=True)
class OnImport:
    """When verl imports ``module``, verl-ext ``does`` this (one line), through ``action(module)``; ``when``: in
    every process that imports it, or only where the CPU platform is selected (the CPU patches)."""

    module: str
    does: str
    action: Callable[[ModuleType], Any]
    when: str = EVERY_PROCESS

    @property
    def by(self) -> str:
        """Where the action is written: ``verl_ext.plugin._register_algorithms``."""
        return f"{self.action.__module__}.{self.action.__qualname__}"


def when_imported(module_name: str, callback: Callable[[ModuleType], Any]) -> Callable[[], None]:
    """Call ``callback(module)`` now if ``module_name`` is imported, else right after verl (or anyone) first imports
    it. Returns the undo: after it, that import calls nothing."""
    waiting = [True]

    def hook(module: ModuleType) -> None:
        if waiting[0]:
            callback(module)

    wrapt.register_post_import_hook(hook, module_name)

    def stop() -> None:
        waiting[0] = False

    return stop


def install(rows: Iterable[OnImport]) -> None:
    """Each row's action, when verl imports its module."""
    for row in rows:
        when_imported(row.module, row.action)
