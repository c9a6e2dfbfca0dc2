"""The GPU backend for the launcher (:mod:`verl_ext.runs.launch`): verl's ``main_ppo`` on this node's GPU with
vLLM and the tiny GPU model.

Two uses of the GPU profile (:mod:`verl_ext.gpu.profile`), as on the CPU (:mod:`verl_ext.cpu.backend`):

- a run written for one GPU (``smoke=False``: ``verl-ext gpu-smoke``, ``tests/gpu``, ``benchmarks/bench_gpu.py``):
  the whole small-run profile goes *under* the run's overrides, with the harness's defaults (2 steps, no
  validation, no checkpoint unless the run asks);
- a run script's GPU smoke (``smoke=True``, ``VERL_EXT_GPU_SMOKE=1``): only the model, the data and what one GPU
  or the offline GPU kit needs go *over* the script's overrides (the script's own GPU settings stay), then the
  smoke caps.

Each run is a child process with its own Ray (on a GPU the process boundary is what reliably returns the vLLM
engine's memory between runs, and Ray's own start, seconds, is small next to vLLM's, minutes); around it,
``nvidia-smi`` is sampled for the peak GPU memory (``RunResult.peak_gpu_mib``). A ``VERL_PLATFORM`` a CPU profile
left in the shell is unset (it would select the CPU platform). Importing this module imports neither verl nor
torch.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from verl_ext.gpu.profile import gpu_environment, gpu_overrides, gpu_smoke_overrides
from verl_ext.runs.backend import HARNESS_DEFAULTS, SMOKE_CAPS, Backend, Surroundings
from verl_ext.runs.outputs import RunPaths
from verl_ext.runs.run import Run

GPU_PROJECT = "verl_ext_gpu"  # the folder of a run written for one GPU (Outputs(root, project=GPU_PROJECT))


@dataclass(frozen=True)
class GPUBackend(Backend):
    """One GPU, the tiny GPU assets in ``assets`` (module docstring)."""

    assets: Path
    smoke: bool = False

    def environment(self) -> dict[str, Optional[str]]:
        return {**gpu_environment(), "VERL_PLATFORM": None}

    def before(self, run: Run, paths: RunPaths) -> list[str]:
        return [] if self.smoke else [*gpu_overrides(self.assets), *HARNESS_DEFAULTS]

    def after(self, run: Run) -> list[str]:
        return [*gpu_smoke_overrides(self.assets), *SMOKE_CAPS] if self.smoke else []

    @contextlib.contextmanager
    def around(self, arguments: Sequence[str], paths: RunPaths) -> Iterator[Surroundings]:
        from verl_ext.gpu.device import GPUMemorySampler

        surroundings = Surroundings()
        with GPUMemorySampler() as memory:
            yield surroundings
        surroundings.peak_gpu_mib = memory.peak_mib
