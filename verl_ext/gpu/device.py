"""Is there a CUDA GPU and vLLM on this machine, and which: what every GPU figure is reported with.

:func:`gpu_unavailable_reason` answers in about a second (torch's CUDA check; vLLM is looked up, not
imported), so GPU commands stop at once with a clear message on a machine without one.
:func:`describe_device` gives the GPU model, memory, driver and the verl / vLLM / torch / transformers
versions; :class:`GPUMemorySampler` records the peak memory in use on the GPUs (``nvidia-smi``) while a
run's processes -- the FSDP actor and the vLLM engine, which verl's own ``perf/max_memory_*`` metrics do
not see together -- share them.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import threading
from importlib import metadata
from typing import Mapping, Optional

NO_GPU_HELP = (
    "  check a run script's configuration without a GPU:  VERL_EXT_DRY_RUN=1 bash run_scripts/<dataset>/<figure>.sh\n"
    "  verl's real training loop on this CPU:             bash run_scripts/cpu/quickstart.sh\n"
    "  on a GPU node: pip install -e \".[gpu]\" (or the offline kit, docs/gpu.md), then run this again"
)


def gpu_unavailable_reason() -> Optional[str]:
    """None when a CUDA GPU and vLLM are usable here; otherwise what is missing, in one sentence."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        cuda = torch.version.cuda or "none (a CPU-only build)"
        return f"no CUDA GPU is visible to torch {torch.__version__} (its CUDA: {cuda})"
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed (verl's GPU rollout): pip install -e \".[gpu]\""
    return None


def count_nvidia_gpus(environ: Optional[Mapping[str, str]] = None) -> int:
    """The GPUs ``nvidia-smi -L`` lists, at most as many as ``CUDA_VISIBLE_DEVICES`` names when it is set
    (0 without nvidia-smi). Cheap (no torch import): the run scripts count before anything starts."""
    environ = os.environ if environ is None else environ
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20,
                                 env=dict(environ)).stdout
    except (OSError, subprocess.SubprocessError):
        listing = ""
    count = sum(1 for line in listing.splitlines() if line.startswith("GPU "))
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = min(count, len([device for device in visible.split(",") if device.strip()]))
    return count


def _version(package: str) -> Optional[str]:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _nvidia_smi(*fields: str) -> list[list[str]]:
    """One row per GPU of ``nvidia-smi --query-gpu=FIELDS`` ([] when nvidia-smi is missing or fails)."""
    try:
        output = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [[cell.strip() for cell in line.split(",")] for line in output.strip().splitlines() if line.strip()]


def describe_device() -> dict[str, Optional[str]]:
    """GPU model, memory, driver, CUDA, and the versions every GPU figure is reported with."""
    import torch

    description: dict[str, Optional[str]] = {
        "gpu": None,
        "gpu_memory_gib": None,
        "driver": None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "verl": _version("verl"),
        "vllm": _version("vllm"),
        "transformers": _version("transformers"),
        "ray": _version("ray"),
    }
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        description["gpu"] = f"{torch.cuda.device_count()} x {properties.name}"
        description["gpu_memory_gib"] = f"{properties.total_memory / 2**30:.0f}"
    rows = _nvidia_smi("driver_version")
    if rows:
        description["driver"] = rows[0][0]
    return description


def format_device(description: dict[str, Optional[str]]) -> str:
    return (
        f"{description['gpu'] or 'no GPU'} ({description['gpu_memory_gib'] or '?'} GiB), driver {description['driver'] or '?'}, "
        f"CUDA {description['cuda'] or '?'}; torch {description['torch']}, verl {description['verl']}, "
        f"vLLM {description['vllm']}, transformers {description['transformers']}, Ray {description['ray']}"
    )


class GPUMemorySampler:
    """Peak memory in use on the GPUs (MiB, all processes: ``nvidia-smi``), sampled every ``interval`` s.

    Use as a context manager around a run; ``peak_mib`` is None when nvidia-smi gave nothing.
    """

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.peak_mib: Optional[float] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            used = [float(row[0]) for row in _nvidia_smi("memory.used") if row and row[0].replace(".", "", 1).isdigit()]
            if used:
                self.peak_mib = max(self.peak_mib or 0.0, sum(used))
            self._stop.wait(self.interval)

    def __enter__(self) -> "GPUMemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
