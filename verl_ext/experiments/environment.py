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

``<root>`` is the checkout when verl-ext runs from one, else the current folder. An empty variable counts as
unset. Everything here is checked without importing torch, verl or Ray (a bad value exits 2 in a fraction of
a second, tests/adversarial/test_launcher_variables.py):

- paths may hold any character, non-ASCII letters, spaces, quotes and brackets included
  (:func:`verl_ext.overrides.hydra_string` writes them so that Hydra reads them back unchanged),
  but not ``${`` (verl's config would interpolate it, escaped or not), a control character (a newline) or
  bytes that are not UTF-8; the folders of data files (``DATA_DIR``, the tiny assets) not ``*``, ``?`` or ``[``
  either (:data:`GLOB_CHARACTERS`: verl's dataset loader, HF datasets, takes a data file's path as a pattern);
- ``OUTPUT_DIR``, ``DATA_DIR`` and the tiny-asset folders must be folders or not exist yet, never a file or
  below one; in the modes that write (smoke, real) ``OUTPUT_DIR`` must be writable (one probe file, removed);
  ``RAW_DATA_PATH`` must exist;
- ``PROJECT_NAME`` and ``EXPERIMENT_NAME`` follow :func:`verl_ext.runs.names.check_name` (no ``.``
  or ``..``, nothing YAML or Hydra reads as null, a number or a boolean);
- ``LOGGER`` names backends verl's ``Tracking`` has (:data:`TRACKING_BACKENDS`).
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from verl_ext.checkpoint_backends import GPU_BACKEND
from verl_ext.runs.backend import Backend
from verl_ext.files import output_place_problem
from verl_ext.runs.names import check_name
from verl_ext.runs.outputs import Outputs
from verl_ext.overrides import INTERPOLATION, hydra_list
from verl_ext.runs.run import Run
from verl_ext.staleness.config import engine_pool_overrides

FLAGS = ("VERL_EXT_DRY_RUN", "VERL_EXT_CPU_SMOKE", "VERL_EXT_GPU_SMOKE")
# verl's Tracking backends (verl/utils/tracking.py, Tracking.supported_backend, and its deprecated "tracking"):
# a copy, so that LOGGER is checked without importing verl; tests/adversarial/test_launcher_variables.py
# compares it with verl's list, and the driver check (verl_ext.driver_checks) reads verl's own
TRACKING_BACKENDS = ("wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard", "console", "clearml", "trackio",
                     "file", "rl_insight", "tracking")


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

    # What the variables make of a run script's runs: the overrides they add, where the runs train and write.

    def run_overrides(self) -> list[str]:
        """The overrides every run of a script gets from the environment, after its algorithm's and setting's:
        ``trainer.logger``; outside a smoke mode the nodes (``trainer.nnodes``, ``trainer.n_gpus_per_node``: a CPU
        smoke keeps the topology the figure's or the user's overrides set -- world size 1 without them, not
        ``N_GPUS_PER_NODE``'s GPU default of 8); with ``ENGINE_GPUS_PER_NODE`` the rollout engine on its own pool,
        weights through verl's ``nccl`` (:func:`verl_ext.staleness.config.engine_pool_overrides`)."""
        nodes = [] if self.smoke else [f"trainer.nnodes={self.nnodes}", f"trainer.n_gpus_per_node={self.n_gpus_per_node}"]
        engine = (engine_pool_overrides(self.engine_nnodes, self.engine_gpus_per_node, GPU_BACKEND)
                  if self.engine_on_own_pool else [])
        return [f"trainer.logger={hydra_list(self.logger)}", *nodes, *engine]

    def backend(self) -> Backend:
        """Where this mode trains: verl's own GPUs, or the CPU or GPU smoke's backend (its profile over the script's
        overrides, 2 steps, no checkpoint, no resume; a CPU smoke of a split puts the engine on one logical GPU of its
        own, weights through verl-ext's ``gloo``). ValueError for a GPU smoke of a split, which needs a second GPU."""
        if self.smoke == "cpu":
            from verl_ext.cpu.backend import CPUBackend

            return CPUBackend(self.tiny_assets, smoke=True, split=self.engine_on_own_pool)
        if self.smoke == "gpu":
            if self.engine_on_own_pool:
                raise ValueError(
                    f"ENGINE_GPUS_PER_NODE={self.engine_gpus_per_node}: the GPU smoke runs on one GPU, and an engine "
                    "on its own pool needs a second one; check the split with VERL_EXT_DRY_RUN=1 or VERL_EXT_CPU_SMOKE=1")
            from verl_ext.gpu.backend import GPUBackend

            return GPUBackend(self.tiny_gpu_assets, smoke=True)
        return Backend()

    def run_outputs(self) -> Outputs:
        """``OUTPUT_DIR`` (or its ``cpu-smoke``/``gpu-smoke`` folder) in the run scripts' layout."""
        return Outputs(self.outputs, layout="scripts")

    def title(self, run: Run) -> str:
        """How the launcher and the dry run name a run: ``project/name`` (and the smoke mode)."""
        return f"{run.project}/{run.name}" + (f" ({self.smoke} smoke)" if self.smoke else "")


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


def check_path_text(name: str, value: str) -> str:
    """A path (or hub id) a variable gives: ``value``, or EnvironmentValueError naming ``name`` (see the module
    docstring for what a path may not hold, and why)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise EnvironmentValueError(f"{name}={value!r} is not UTF-8 text: verl's config and metrics are") from None
    control = next((char for char in value if unicodedata.category(char) == "Cc"), None)
    if control is not None:
        raise EnvironmentValueError(f"{name}={value!r} contains the control character {control!r} (a newline or tab "
                                    "pasted with it?): remove it")
    if INTERPOLATION in value:
        raise EnvironmentValueError(f"{name}={value!r} contains '${{': verl's config (OmegaConf) would read it as an "
                                    "interpolation, and no escape survives verl's resolving of the config: use a path "
                                    "without '${'")
    return value


# what HF datasets (verl's RLHFDataset loads data.train_files/val_files with datasets.load_dataset) reads as a glob
# pattern in a data file's path: "[v]" then matches no file, "*" or "?" other files too (fsspec's has_magic)
GLOB_CHARACTERS = "*?["


def _path(environ: Mapping[str, str], name: str, default: Path, holds_data_files: bool = False) -> Path:
    value = _get(environ, name)
    if value is None:
        path = default
    else:
        try:
            path = Path(check_path_text(name, value)).expanduser().absolute()
        except RuntimeError as error:  # "~user/..." of an unknown user
            raise EnvironmentValueError(f"{name}={value!r}: {error}") from None
    check_path_text(name, str(path))  # the default too: the checkout or home folder may hold '${'
    glob = next((char for char in str(path) if char in GLOB_CHARACTERS), None) if holds_data_files else None
    if glob is not None:
        raise EnvironmentValueError(
            f"{name}={str(path)!r} contains {glob!r}: verl loads its data files with HF datasets, which reads '*', '?' "
            "and '[' in a path as a glob pattern (no file, or other files, would be read): use a folder without them")
    problem = output_place_problem(path, follow_links=True, writable=False)
    if problem:
        raise EnvironmentValueError(f"{name}={str(path)!r} cannot be a folder: {problem}")
    return path


def _logger(environ: Mapping[str, str]) -> tuple[str, ...]:
    value = _get(environ, "LOGGER") or "console,file"
    names = [name for name in re.split(r"[,\s]+", value) if name]
    unknown = [name for name in names if name not in TRACKING_BACKENDS]
    if unknown or not names:
        raise EnvironmentValueError(
            f"LOGGER={value!r}: {', '.join(map(repr, unknown)) or 'no name'} is not a logger of verl's "
            f"(trainer.logger); allowed, separated by commas: {', '.join(TRACKING_BACKENDS)}")
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
    if model_path is not None:
        check_path_text("MODEL_PATH", model_path)
    raw = _get(environ, "RAW_DATA_PATH")
    if raw is not None:
        check_path_text("RAW_DATA_PATH", raw)
        if not os.path.exists(os.path.expanduser(raw)):
            raise EnvironmentValueError(f"RAW_DATA_PATH={raw!r} does not exist (the raw files data_prep reads; unset "
                                        "it to download them)")
    engine_gpus_per_node = _count(environ, "ENGINE_GPUS_PER_NODE", None)
    if engine_gpus_per_node is None and _get(environ, "ENGINE_NNODES") is not None:
        raise EnvironmentValueError(
            f"ENGINE_NNODES={_get(environ, 'ENGINE_NNODES')!r} needs ENGINE_GPUS_PER_NODE (the GPUs per node of the "
            "engine's own pool); without it the engine shares the trainer's GPUs")
    return RunEnvironment(
        data_dir=_path(environ, "DATA_DIR", root / "data", holds_data_files=True),
        output_dir=_path(environ, "OUTPUT_DIR", root / "outputs"),
        tiny_assets=_path(environ, "VERL_EXT_TINY_ASSETS", default_assets_dir("cpu"), holds_data_files=True),
        tiny_gpu_assets=_path(environ, "VERL_EXT_TINY_GPU_ASSETS", default_assets_dir("gpu"), holds_data_files=True),
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
