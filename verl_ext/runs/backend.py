"""Where a run trains: the :class:`Backend` a launcher is given, and what every backend shares.

A backend adds to a run's overrides (a profile *under* them, :meth:`Backend.before`; what it must set whatever the run
says, *over* them, :meth:`Backend.after`), to the child process's environment, and around the process (a local Ray
cluster, a GPU memory sampler); and it says which verl platform the run's driver will resolve
(:meth:`Backend.as_driver`), so that the launching process checks the run there, as the driver will. This base is
verl's own GPUs, the run as its overrides say (a run script's real run); :class:`verl_ext.cpu.backend.CPUBackend` and
:class:`verl_ext.gpu.backend.GPUBackend` override what they add.

Pure: nothing here imports verl or torch.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional, Sequence

from verl_ext.runs.run import Run

if TYPE_CHECKING:
    from verl_ext.runs.outputs import RunPaths

# What a run written for a backend (the harness: tests, quickstart, lab, GPU smoke) does unless it asks otherwise:
# 2 steps, no validation, no checkpoint.
HARNESS_STEPS = 2
HARNESS_DEFAULTS = (f"trainer.total_training_steps={HARNESS_STEPS}", "trainer.val_before_train=False",
                    "trainer.test_freq=-1", "trainer.save_freq=-1")
# What a run script's smoke (VERL_EXT_CPU_SMOKE=1, VERL_EXT_GPU_SMOKE=1) caps, whatever the script sets: 2 steps,
# no checkpoint, no resume.
SMOKE_STEPS = 2
SMOKE_CAPS = (f"trainer.total_training_steps={SMOKE_STEPS}", "trainer.save_freq=-1", "trainer.resume_mode=disable")


@dataclass
class Surroundings:
    """What a backend puts around a child process (:meth:`Backend.around`): variables to add to its environment,
    processes that are not its descendants to measure with it (a local Ray cluster's nodes), and figures the
    backend measured itself (filled in when the block ends: the peak GPU memory)."""

    environment: dict[str, str] = field(default_factory=dict)
    also_measure: Optional[Callable[[], Iterable[int]]] = None
    peak_gpu_mib: Optional[float] = None


class Backend:
    """Where a run trains (module docstring). This base: verl's own GPUs, no profile, no environment, nothing around
    the process, the platform this process resolves (the GPU node's, where the run scripts start their runs)."""

    def environment(self) -> dict[str, Optional[str]]:
        """Environment variables of a run here (set before Ray starts; its workers inherit them); None: unset."""
        return {}

    def before(self, run: Run, paths: "RunPaths") -> list[str]:
        """Overrides under the run's own (layer 1 of :mod:`verl_ext.runs.compose`)."""
        return []

    def after(self, run: Run) -> list[str]:
        """Overrides over the run's own (layer 4)."""
        return []

    @contextlib.contextmanager
    def as_driver(self, overrides: Sequence[str]) -> Iterator[None]:
        """Within the block, this process stands where the driver of the run of ``overrides`` will: the verl
        platform it resolves and what it reads of what the backend puts around it (where the launcher checks the
        run: ``trainer.device`` and the checks that depend on it). This base: this process as it is."""
        yield

    @contextlib.contextmanager
    def around(self, arguments: Sequence[str], paths: "RunPaths") -> Iterator[Surroundings]:
        """What the child process of ``arguments`` runs inside (a local Ray cluster, a GPU memory sampler)."""
        yield Surroundings()
