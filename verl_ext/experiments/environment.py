"""The environment variables a run script reads, read once and checked before anything runs.

``bash run_scripts/...`` (and ``python -m verl_ext.experiments``) take their choices from the environment;
:func:`read_environment` turns ``os.environ`` into one frozen :class:`RunEnvironment`, and a bad value stops
the command with an error naming the variable, its value and what is allowed (:class:`EnvironmentValueError`),
before a config is composed, data prepared or a process started.

=======================  ==========================================  ==================================================
variable                 default                                     meaning
=======================  ==========================================  ==================================================
MODEL_PATH               the profile's hub model                     a local model folder or hub id
DATA_DIR                 ``<root>/data``                             ``$DATA_DIR/<dataset>/{train,test}.parquet``
RAW_DATA_PATH            unset: download                             raw files for data_prep (``--local_dataset_path``)
N_GPUS_PER_NODE, NNODES  8, 1                                        ``trainer.n_gpus_per_node``, ``trainer.nnodes``
ENGINE_GPUS_PER_NODE,    unset: the engine shares the trainer's GPUs  set: the rollout engine on its own pool of
ENGINE_NNODES            (1 when ENGINE_GPUS_PER_NODE is set)        ENGINE_NNODES x ENGINE_GPUS_PER_NODE GPUs, weights
                                                                     through verl's ``nccl`` checkpoint engine
                                                                     (``actor_rollout_ref.hybrid_engine=false``)
PROJECT_NAME             the figure / ``verl-ext-<profile>``         ``trainer.project_name``, the metrics folder
EXPERIMENT_NAME          the run name                                one run: its name; a grid: a prefix of each name
LOGGER                   ``console,file``                            ``trainer.logger`` (``file`` always added)
OUTPUT_DIR               ``<root>/outputs``                          metrics, checkpoints, smoke outputs
TOTAL_STEPS              the profile's                               ``trainer.total_training_steps``
KL_TO_INITIAL            1                                           measure the KL to the initial policy
ZERO_VARIANCE_MASKING    the figure's (0 but for off-policy GRPO)    1: mask equal-reward groups (``-zvm`` in names)
ALGORITHMS, SETTINGS,    the figure's                                replace a part of a figure's grid
LEARNING_RATES
CONTINUE_ON_ERROR        0                                           1: a grid goes on after a failed run
VERL_EXT_DRY_RUN         0                                           1: check every run's config, start nothing
VERL_EXT_CPU_SMOKE       0                                           1: 2 real steps per run on the CPU backend
VERL_EXT_GPU_SMOKE       0                                           1: 2 real steps per run on one GPU
VERL_EXT_TINY_ASSETS     :func:`verl_ext.tiny.assets.default_assets_dir`  the CPU smoke's tiny model and data
VERL_EXT_TINY_GPU_ASSETS the same, ``gpu`` size                      the GPU smoke's
VERL_EXT_SKIP_GPU_CHECK  0                                           1: skip the NVIDIA GPU count (other accelerators)
=======================  ==========================================  ==================================================

``<root>`` is the checkout when verl-ext runs from one, else the current folder. Paths must not contain a
space, ``,`` or ``=`` (Hydra overrides carry them). An empty variable counts as unset.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from verl_ext.experiments.run_names import check_name

FLAGS = ("VERL_EXT_DRY_RUN", "VERL_EXT_CPU_SMOKE", "VERL_EXT_GPU_SMOKE")


class EnvironmentValueError(ValueError):
    """A variable set to a value it does not take; the message names the variable and what is allowed."""


def default_root() -> Path:
    """The checkout verl-ext runs from (it has ``setup.py`` next to ``verl_ext/``), else the current folder."""
    repo = Path(__file__).resolve().parents[2]
    if (repo / "setup.py").is_file() and (repo / "verl_ext").is_dir():
        return repo
    return Path.cwd()


@dataclass(frozen=True)
class RunEnvironment:
    data_dir: Path
    output_dir: Path
    tiny_assets: Path
    tiny_gpu_assets: Path
    model_path: Optional[str] = None
    raw_data_path: Optional[str] = None
    n_gpus_per_node: int = 8
    nnodes: int = 1
    engine_gpus_per_node: Optional[int] = None  # None: the engine is colocated with the actor
    engine_nnodes: int = 1
    project_name: Optional[str] = None
    experiment_name: Optional[str] = None
    logger: tuple[str, ...] = ("console", "file")
    total_steps: Optional[int] = None
    kl_to_initial: bool = True
    zero_variance_masking: Optional[bool] = None  # None: the figure's default (off outside a figure)
    algorithms: Optional[str] = None
    settings: Optional[str] = None
    learning_rates: Optional[str] = None
    continue_on_error: bool = False
    dry_run: bool = False
    cpu_smoke: bool = False
    gpu_smoke: bool = False
    skip_gpu_check: bool = False

    @property
    def engine_on_own_pool(self) -> bool:
        return self.engine_gpus_per_node is not None

    @property
    def smoke(self) -> Optional[str]:
        """``"cpu"``, ``"gpu"`` or None: which smoke profile replaces the model and data."""
        return "cpu" if self.cpu_smoke else "gpu" if self.gpu_smoke else None

    @property
    def outputs(self) -> Path:
        """Where this mode's metrics and checkpoints go: ``OUTPUT_DIR``, or its ``cpu-smoke``/``gpu-smoke`` folder."""
        return self.output_dir / f"{self.smoke}-smoke" if self.smoke else self.output_dir


def _get(environ: Mapping[str, str], name: str) -> Optional[str]:
    value = environ.get(name)
    return value if value not in (None, "") else None


def _flag(environ: Mapping[str, str], name: str, default: bool = False) -> bool:
    value = _get(environ, name)
    if value is None:
        return default
    if value not in ("0", "1"):
        raise EnvironmentValueError(f"{name}={value!r} must be 0 or 1")
    return value == "1"


def _count(environ: Mapping[str, str], name: str, default: Optional[int]) -> Optional[int]:
    value = _get(environ, name)
    if value is None:
        return default
    if not re.fullmatch(r"[0-9]{1,9}", value) or int(value) < 1:
        raise EnvironmentValueError(f"{name}={value!r} must be an integer >= 1 (at most 9 digits)")
    return int(value)


def _path(environ: Mapping[str, str], name: str, default: Path) -> Path:
    value = _get(environ, name)
    path = Path(value).expanduser().absolute() if value is not None else default
    if re.search(r"[\s,=]", str(path)):
        raise EnvironmentValueError(f"{name}={str(path)!r} contains a space, ',' or '=': Hydra overrides cannot carry it")
    return path


def _logger(environ: Mapping[str, str]) -> tuple[str, ...]:
    value = _get(environ, "LOGGER") or "console,file"
    names = [name for name in re.split(r"[,\s]+", value) if name]
    bad = [name for name in names if not re.fullmatch(r"[A-Za-z0-9_]+", name)]
    if bad or not names:
        raise EnvironmentValueError(f"LOGGER={value!r} must be logger names separated by commas, e.g. console,file,wandb")
    # verl's "file" backend is always on: verl-ext plot reads its JSONL
    return tuple(dict.fromkeys(names + ["file"]))


def read_environment(environ: Optional[Mapping[str, str]] = None) -> RunEnvironment:
    """``os.environ`` (or ``environ``) as a :class:`RunEnvironment`; EnvironmentValueError on a bad value."""
    from verl_ext.tiny.assets import default_assets_dir

    environ = os.environ if environ is None else environ
    root = default_root()
    flags = {name: _flag(environ, name) for name in FLAGS}
    if flags["VERL_EXT_CPU_SMOKE"] and flags["VERL_EXT_GPU_SMOKE"]:
        raise EnvironmentValueError("VERL_EXT_CPU_SMOKE=1 and VERL_EXT_GPU_SMOKE=1 exclude each other: pick one")
    masking = _get(environ, "ZERO_VARIANCE_MASKING")
    names = {}
    for name in ("PROJECT_NAME", "EXPERIMENT_NAME"):
        value = _get(environ, name)
        if value is not None:
            try:
                check_name(value, name)
            except ValueError as error:
                raise EnvironmentValueError(str(error)) from None
        names[name] = value
    model_path = _get(environ, "MODEL_PATH")
    if model_path is not None and re.search(r"[\s,=]", model_path):
        raise EnvironmentValueError(f"MODEL_PATH={model_path!r} contains a space, ',' or '=': Hydra overrides cannot carry it")
    raw = _get(environ, "RAW_DATA_PATH")
    engine_gpus_per_node = _count(environ, "ENGINE_GPUS_PER_NODE", None)
    if engine_gpus_per_node is None and _get(environ, "ENGINE_NNODES") is not None:
        raise EnvironmentValueError(
            f"ENGINE_NNODES={_get(environ, 'ENGINE_NNODES')!r} needs ENGINE_GPUS_PER_NODE (the GPUs per node of the "
            "engine's own pool); without it the engine shares the trainer's GPUs")
    return RunEnvironment(
        data_dir=_path(environ, "DATA_DIR", root / "data"),
        output_dir=_path(environ, "OUTPUT_DIR", root / "outputs"),
        tiny_assets=_path(environ, "VERL_EXT_TINY_ASSETS", default_assets_dir("cpu")),
        tiny_gpu_assets=_path(environ, "VERL_EXT_TINY_GPU_ASSETS", default_assets_dir("gpu")),
        model_path=model_path,
        raw_data_path=raw,
        n_gpus_per_node=_count(environ, "N_GPUS_PER_NODE", 8),
        nnodes=_count(environ, "NNODES", 1),
        engine_gpus_per_node=engine_gpus_per_node,
        engine_nnodes=_count(environ, "ENGINE_NNODES", 1),
        project_name=names["PROJECT_NAME"],
        experiment_name=names["EXPERIMENT_NAME"],
        logger=_logger(environ),
        total_steps=_count(environ, "TOTAL_STEPS", None),
        kl_to_initial=_flag(environ, "KL_TO_INITIAL", True),
        zero_variance_masking=None if masking is None else _flag(environ, "ZERO_VARIANCE_MASKING"),
        algorithms=_get(environ, "ALGORITHMS"),
        settings=_get(environ, "SETTINGS"),
        learning_rates=_get(environ, "LEARNING_RATES"),
        continue_on_error=_flag(environ, "CONTINUE_ON_ERROR"),
        dry_run=flags["VERL_EXT_DRY_RUN"],
        cpu_smoke=flags["VERL_EXT_CPU_SMOKE"],
        gpu_smoke=flags["VERL_EXT_GPU_SMOKE"],
        skip_gpu_check=_flag(environ, "VERL_EXT_SKIP_GPU_CHECK"),
    )
