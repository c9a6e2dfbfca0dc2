"""The one composition of a run: a :class:`~verl_ext.runs.run.Run` on a backend, writing into outputs -> ``main_ppo``'s
overrides -> the config verl's driver composes -> the driver's checks, on the platform the run will use.

Every way of running a run goes through here: the launcher (:func:`verl_ext.runs.launch.launch`, a child process
or the CPU backend's in-process session), the dry run (:mod:`verl_ext.preflight`) and the run scripts' modes.
``main_ppo``'s arguments typed on a command line (``python -m verl_ext.preflight -- ...``) are parsed back into
the same :class:`MainPPOArguments` a composed run gives ``main_ppo``, and checked by the same :meth:`MainPPOArguments.check`.

:func:`compose` joins the layers, merged in this order, a key set later winning
(:func:`verl_ext.overrides.merge_overrides`):

1. the backend's profile, sized for the run (``Backend.before``: the CPU or GPU profile of a run written for
   that backend, with its bookkeeping: 2 steps, no validation, no checkpoint unless the run asks);
2. the names (``trainer.project_name``, ``trainer.experiment_name``) and the run's ``steps``, when set;
3. the run's own overrides;
4. what the backend must set whatever the run says (``Backend.after``: a run script's CPU or GPU smoke swaps in
   the tiny model and data and caps the run at 2 steps, docs/run-scripts.md);
5. the checkpoint folder and the metrics file (``trainer.default_local_dir``, verl's file-logger path in the Ray
   job's environment, so that every worker on every node writes the metrics where they are read). A
   ``trainer.default_local_dir`` among the run's own overrides is honoured: it is the run's checkpoint folder
   (:meth:`verl_ext.runs.outputs.Outputs.paths`); a file-logger path among them is refused
   (:func:`refuse_logger_paths`): verl-ext writes the metrics where it reads them back.

:meth:`ComposedRun.check` is what ``python -m verl.trainer.main_ppo``'s driver does before Ray starts, in this
process: Hydra composes the config from the same directory, name and overrides (:func:`hydra_config`), then, on the
verl platform the backend's driver will resolve (:meth:`Backend.as_driver`: the CPU one for the CPU backend, so
``trainer.device`` stays ``cpu`` and every CPU-topology check applies), ``auto_set_device`` and the very
``validate_config`` the driver calls, which verl-ext's plugin joins to its own checks
(:func:`verl_ext.driver_checks.install_driver_checks`: batch arithmetic, topology, the ``delayed_sync`` block, the
loss keys, every interpolation resolved, the trainer mode and the reward function looked up). Then the run's name is
checked against the composed config (:func:`verl_ext.runs.claims.check_claims`: a name that says what the config
does not train is refused). A failure is a :class:`~verl_ext.runs.run.RunRefused` naming the key and what is
allowed, in seconds (verl's import and Hydra), before anything is written or started.
"""

from __future__ import annotations

import contextlib
import copy
import io
import sys
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager, Iterator, Optional, Sequence

from verl_ext.runs.backend import Backend
from verl_ext.runs.claims import BACKEND_OVER, check_claims
from verl_ext.runs.outputs import CHECKPOINTS_KEY, Outputs, RunPaths
from verl_ext.overrides import hydra_string, merge_overrides, override_key
from verl_ext.runs.run import Run, RunRefused

MAIN_PPO = "verl.trainer.main_ppo"  # python -m MAIN_PPO --config-path=DIR --config-name=NAME overrides...
LOGGER_PATH_KEY = "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"
LOGGER_PATH_VARIABLE = "VERL_FILE_LOGGER_PATH"
# where verl's file logger writes, as a run's overrides could set it (its two variables in the Ray job's environment)
LOGGER_ROOT_VARIABLE = "VERL_FILE_LOGGER_ROOT"
LOGGER_KEYS = tuple(f"ray_kwargs.ray_init.runtime_env.env_vars.{name}"
                    for name in (LOGGER_PATH_VARIABLE, LOGGER_ROOT_VARIABLE))


@dataclass(frozen=True)
class ComposedRun:
    """A run on a backend, writing into outputs: its paths and the overrides ``main_ppo`` is given."""

    run: Run
    backend: Backend
    outputs: Outputs
    paths: RunPaths
    overrides: tuple[str, ...]
    # the layers merged into ``overrides``, in order: (what, its overrides); says which override set a key
    layers: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def main_ppo(self) -> "MainPPOArguments":
        """Hydra's config directory and name, and the overrides: what ``main_ppo`` is given."""
        return MainPPOArguments(self.run.resolved_config_dir(), self.run.config_name, self.overrides)

    @property
    def arguments(self) -> list[str]:
        """``--config-path=DIR --config-name=NAME overrides...``: what follows ``python -m verl.trainer.main_ppo``."""
        return self.main_ppo.argv

    @property
    def command(self) -> list[str]:
        """``python -m verl.trainer.main_ppo ARGUMENTS`` with this process's Python: the one command line of verl's
        trainer, as every launcher writes it."""
        return [sys.executable, "-m", MAIN_PPO, *self.arguments]

    def config(self):
        """The config ``main_ppo`` composes (Hydra, verl imported)."""
        return self.main_ppo.config()

    def check(self) -> "CheckedRun":
        """The driver's checks on the composed config, on the backend's platform (module docstring); RunRefused."""
        try:
            config, resolved, notes = self.main_ppo.check(self.backend.as_driver(self.overrides))
        except Exception as error:  # a bad config: Hydra's, verl's or verl-ext's message, with its causes
            raise RunRefused(self.run.name, error_text(error)) from error
        check_claims(self.run, self.layers, resolved)  # the name says what the config trains, or the run is refused
        return CheckedRun(self, config, resolved, tuple(notes))


@dataclass(frozen=True)
class CheckedRun:
    """A composed run whose config passed the driver's checks: the config (what the in-process session runs), its
    resolved values and the checks' notes."""

    composed: ComposedRun
    config: Any  # omegaconf DictConfig
    resolved: dict
    notes: tuple[str, ...] = ()


def compose(run: Run, backend: Backend, outputs: Outputs) -> ComposedRun:
    """``run`` on ``backend`` writing into ``outputs``: its paths (computed here, once) and the layers of the module
    docstring. A topology or batch the backend cannot size raises :class:`verl_ext.config_values.ConfigError`."""
    refuse_logger_paths(run, outputs)
    paths = outputs.paths(run)  # a trainer.default_local_dir of the run's own is its checkpoint folder
    names = [f"trainer.project_name={hydra_string(outputs.project_of(run))}",
             f"trainer.experiment_name={hydra_string(run.name)}"]
    steps = [f"trainer.total_training_steps={run.steps}"] if run.steps is not None else []
    layers = (
        ("the backend's profile, under the run's overrides", tuple(backend.before(run, paths))),
        ("the run's name and steps", (*names, *steps)),
        ("the run's own overrides, after its preset's: a figure's or the user's", run.overrides),
        (BACKEND_OVER, tuple(backend.after(run))),
        ("the run's folders", (f"{CHECKPOINTS_KEY}={hydra_string(str(paths.checkpoints))}",
                               f"{LOGGER_PATH_KEY}={hydra_string(str(paths.metrics))}")),
    )
    overrides = merge_overrides(*(layer for _, layer in layers))
    return ComposedRun(run, backend, outputs, paths, tuple(overrides), layers)


def refuse_logger_paths(run: Run, outputs: Outputs) -> None:
    """:class:`RunRefused` when the run's own overrides set where verl's file logger writes (:data:`LOGGER_KEYS`):
    verl-ext sets it to the metrics file it reads back (the plot, the lab, the run's folder), and would otherwise
    replace the user's value without a word. The message names the key and where the metrics go."""
    for item in run.overrides:
        if override_key(item) in LOGGER_KEYS:
            raise RunRefused(
                run.name,
                f"{override_key(item)}: set by the override {item!r}; verl-ext writes this run's metrics where it "
                f"reads them back, {outputs.paths(run).metrics}: choose the output folder instead (OUTPUT_DIR for the "
                "run scripts, --out for the lab and the quickstart) and drop the override",
                what="it sets where verl's file logger writes, which verl-ext sets")


@dataclass(frozen=True)
class MainPPOArguments:
    """What follows ``python -m verl.trainer.main_ppo``: Hydra's config directory and name, and the overrides."""

    config_dir: Path
    config_name: str
    overrides: tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        return [f"--config-path={self.config_dir}", f"--config-name={self.config_name}", *self.overrides]

    def config(self):
        """The config ``main_ppo`` composes from them (Hydra, verl imported)."""
        return hydra_config(self.config_dir, self.config_name, self.overrides)

    def check(self, platform: ContextManager = contextlib.nullcontext()) -> tuple[Any, dict, list[str]]:
        """(config, resolved, notes): the config composed and checked as ``main_ppo``'s driver checks it
        (:func:`check_as_the_driver`), on the platform ``platform`` holds (this process's by default); raises on
        the first failure."""
        with _HYDRA, warnings.catch_warnings():  # process-wide state: one check at a time
            warnings.simplefilter("ignore")  # verl's import-time notices (missing optional engines, ...)
            with platform:
                config = self.config()
                resolved, notes = check_as_the_driver(config)
        return config, resolved, notes


def parse_main_ppo_argv(argv: Sequence[str]) -> MainPPOArguments:
    """Split ``main_ppo``'s arguments given on the command line (``python -m verl_ext.preflight -- ...``) into Hydra's
    config directory, config name and overrides: the CLI's boundary (every run verl-ext starts is composed, never
    parsed back). ValueError naming the argument."""
    config_dir: Optional[str] = None
    config_name: Optional[str] = None
    overrides: list[str] = []
    items = list(argv)
    index = 0
    while index < len(items):
        item = items[index]
        for flags, target in ((("--config-path", "-cp"), "dir"), (("--config-name", "-cn"), "name")):
            flag = next((f for f in flags if item == f or item.startswith(f + "=")), None)
            if flag is None:
                continue
            if item == flag:
                if index + 1 >= len(items):
                    raise ValueError(f"{flag} needs a value")
                index += 1
                value = items[index]
            else:
                value = item[len(flag) + 1 :]
            if target == "dir":
                config_dir = value
            else:
                config_name = value
            break
        else:
            if item.startswith("-"):
                raise ValueError(f"unsupported main_ppo argument {item!r} (only --config-path, --config-name and overrides)")
            overrides.append(item)
        index += 1
    if config_dir is None or config_name is None:
        raise ValueError("the arguments must name --config-path and --config-name, as the run scripts do")
    directory = Path(config_dir)
    if not directory.is_absolute():
        raise ValueError(f"--config-path={config_dir} must be an absolute path (Hydra resolves it against the script)")
    if not (directory / f"{config_name}.yaml").is_file():
        raise ValueError(f"--config-path/--config-name: no file {directory / (config_name + '.yaml')}")
    return MainPPOArguments(directory, config_name, tuple(overrides))


# Hydra's composition goes through its one global instance, a check swaps the warning filters and stdout: one at a time
_HYDRA = threading.RLock()


def hydra_config(config_dir: str | Path, config_name: str, overrides):
    """The config ``main_ppo`` would receive (``@hydra.main`` with the same directory, name and overrides). One
    composition at a time in a process (a launcher thread beside an in-process session)."""
    import verl  # noqa: F401  (loads the verl.plugins entry points, as every verl process does)
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    with _HYDRA:
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            return hydra_compose(config_name=config_name, overrides=list(overrides))


def check_as_the_driver(config) -> tuple[dict, list[str]]:
    """What ``main_ppo``'s driver runs before Ray, on this process's platform; raises on the first failure.

    ``auto_set_device``, then what the driver's ``validate_config`` runs with verl-ext's plugin loaded:
    :func:`verl_ext.driver_checks.validate_run_config`, verl-ext's checks then verl's own. Returns the resolved config
    (a plain dict, resolved once by the checks) and notes: the checkpoint engines of a GPU config that this machine
    cannot import (nccl without cupy), verl's LoRA rank rule used where vLLM is not installed."""
    from verl.utils.device import auto_set_device

    from verl_ext.checkpoint_backends import tolerate_unimportable_backends
    from verl_ext.checks.lora import vllm_lora_rank_without_vllm
    from verl_ext.driver_checks import validate_run_config

    auto_set_device(config)
    # validate_config prints; a GPU config checked here may name a checkpoint engine whose transport this machine lacks
    # (nccl: cupy), or a vLLM rollout with LoRA, for which verl looks the rank up in vLLM
    with contextlib.redirect_stdout(io.StringIO()), tolerate_unimportable_backends() as tolerated, \
            vllm_lora_rank_without_vllm(config) as lora_notes:
        resolved = validate_run_config(config)
    return resolved, list(tolerated.notes) + lora_notes


def error_text(error: BaseException) -> str:
    """The exception and its causes, innermost last (Hydra wraps the config classes' errors): the key and what is
    allowed end the text."""
    parts = []
    seen = set()
    current: Optional[BaseException] = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        message = str(current).strip() or repr(current)
        parts.append(f"{type(current).__name__}: {message}")
        current = current.__cause__ or current.__context__
    return "\n  caused by ".join(parts)


@contextlib.contextmanager
def memoised_config_files() -> Iterator[None]:
    """Within the block, Hydra parses each YAML file of the config tree once (a deep copy per use).

    Hydra re-reads and re-parses every file of verl's config tree (about 30) on each compose, which is most of
    a check's time; in a batch of runs the files do not change. Uses Hydra's (private) config repository;
    where that is missing, composes without the memo.
    """
    try:
        from hydra._internal.config_repository import ConfigRepository
    except ImportError:
        yield
        return
    original = getattr(ConfigRepository, "load_config", None)
    if original is None:
        yield
        return
    parsed: dict = {}

    def load_config(self, config_path):
        key = (tuple(str(getattr(source, "path", source)) for source in self.sources), config_path)
        if key not in parsed:
            parsed[key] = original(self, config_path)
        return copy.deepcopy(parsed[key])

    ConfigRepository.load_config = load_config
    try:
        yield
    finally:
        ConfigRepository.load_config = original
