"""Launch verl's real ``main_ppo`` on the CPU backend and return what it logged.

Two ways, same overrides (:func:`run_overrides` = the CPU profile, then the harness's bookkeeping, then the
run's own overrides; a key set later wins):

- :func:`run_main_ppo` runs ``python -m verl.trainer.main_ppo --config-path ... --config-name ...`` in a
  child process: its own Ray cluster, exactly what a user types. The quickstart does this.
- :class:`CPURaySession` starts Ray once in this process and runs each config through verl's own
  ``verl.trainer.main_ppo.main`` (the function Hydra wraps; passed a composed config it runs it as is),
  which sees Ray already initialised and only creates its TaskRunner. Between runs it waits until the
  previous run's actors are gone. This saves Ray's start and stop (about 10 s and 5-20 s on two cores)
  per run; the workers themselves (trainer, rollout server, agent-loop and reward workers) are new processes
  for every run -- verl creates them in each TaskRunner, so they cannot be shared.

Each run writes into ``<base_dir>/<project>/``: ``<name>.jsonl`` (verl's file logger: every step's
metrics), ``<name>/rollout_events.jsonl`` (the CPU rollout's weight events), ``<name>/checkpoints``
(``trainer.default_local_dir``) and, for child processes, ``<name>/main_ppo.log``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from verl_ext.cpu.profile import cpu_environment, cpu_overrides
from verl_ext.cpu.rollout_events import read_rollout_events
from verl_ext.experiments.overrides import merge_overrides
from verl_ext.experiments.run_names import check_name
from verl_ext.metrics_file import file_logger_path, read_metrics_file
from verl_ext.recipe import CONFIG_NAME as RECIPE_CONFIG_NAME
from verl_ext.recipe import config_dir as recipe_config_dir  # the packaged recipe config, in a checkout or installed

PROJECT_NAME = "verl_ext_cpu"
VERL_CONFIG_NAME = "ppo_trainer"


def verl_config_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    return Path(spec.origin).parent / "trainer" / "config"


@dataclass(frozen=True)
class CPURun:
    """One ``main_ppo`` run: a name (its ``trainer.experiment_name``), its overrides and its length."""

    name: str
    overrides: tuple[str, ...] = ()
    steps: int = 2
    config_name: str = RECIPE_CONFIG_NAME
    config_dir: Optional[Path] = None  # default: the recipe's for rec_trainer, verl's for ppo_trainer
    checkpoint_dir: Optional[Path] = None  # default: <run dir>/checkpoints; share it to resume a run

    def __post_init__(self) -> None:
        check_name(self.name, "CPURun name")  # the run names' one alphabet (verl_ext.experiments.run_names.SAFE)
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"CPURun {self.name!r}: steps must be an integer >= 1, got {self.steps!r}")
        if isinstance(self.overrides, str):
            raise TypeError(f"CPURun {self.name!r}: overrides must be a sequence of 'key=value' strings, not one string")

    def resolved_config_dir(self) -> Path:
        if self.config_dir is not None:
            return Path(self.config_dir)
        return verl_config_dir() if self.config_name == VERL_CONFIG_NAME else recipe_config_dir()


@dataclass
class CPURunResult:
    run: CPURun
    run_dir: Path
    metrics_path: Path
    events_path: Path
    checkpoint_dir: Path
    log_path: Optional[Path]
    wall_seconds: float
    error: Optional[str] = None
    measurements: Optional[Any] = None  # RunMeasurements, for child-process runs
    _steps: Optional[list[dict[str, Any]]] = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def steps(self) -> list[dict[str, Any]]:
        """verl's logged metrics, one dict per step (see :func:`verl_ext.metrics_file.read_metrics_file`)."""
        if self._steps is None:
            self._steps = read_metrics_file(self.metrics_path).steps if self.metrics_path.is_file() else []
        return self._steps

    @property
    def events(self) -> list[dict[str, Any]]:
        """The CPU rollout's weight events (see :mod:`verl_ext.cpu.rollout_events`)."""
        return read_rollout_events(self.events_path) if self.events_path.is_file() else []

    def raise_for_error(self) -> "CPURunResult":
        if self.error is not None:
            log = f"; log: {self.log_path}" if self.log_path else ""
            raise RuntimeError(f"CPU run {self.run.name!r} failed: {self.error}{log}")
        return self


def run_paths(base_dir: Path, run: CPURun, project: str = PROJECT_NAME) -> dict[str, Path]:
    """Where a run of ``project`` writes (the CPU and GPU launchers share the layout)."""
    run_dir = Path(base_dir).resolve() / project / run.name
    return {
        "run_dir": run_dir,
        "metrics": file_logger_path(Path(base_dir).resolve(), project, run.name),
        "events": run_dir / "rollout_events.jsonl",
        "checkpoints": Path(run.checkpoint_dir).resolve() if run.checkpoint_dir else run_dir / "checkpoints",
        "log": run_dir / "main_ppo.log",
    }


def bookkeeping_overrides(run: CPURun, paths: dict[str, Path], project: str) -> list[str]:
    """Steps, names and checkpoint folder of a harness run; no validation or checkpoint unless the run asks."""
    return [
        f"trainer.total_training_steps={run.steps}",
        f"trainer.project_name={project}",
        f"trainer.experiment_name={run.name}",
        f"trainer.default_local_dir={paths['checkpoints']}",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
    ]


def run_overrides(run: CPURun, base_dir: Path, assets_dir: Path) -> list[str]:
    """The full override list of ``run``: CPU profile, then bookkeeping, then the run's own overrides."""
    paths = run_paths(base_dir, run)
    bookkeeping = bookkeeping_overrides(run, paths, PROJECT_NAME)
    bookkeeping.append(f"+actor_rollout_ref.rollout.engine_kwargs.cpu.event_log={paths['events']}")
    return merge_overrides(cpu_overrides(assets_dir), bookkeeping, run.overrides)


def _prepare_run_dir(paths: dict[str, Path]) -> None:
    paths["run_dir"].mkdir(parents=True, exist_ok=True)
    paths["metrics"].parent.mkdir(parents=True, exist_ok=True)
    for stale in (paths["metrics"], paths["events"]):
        stale.unlink(missing_ok=True)


def _result(run: CPURun, paths: dict[str, Path], started: float, error: Optional[str], log: bool) -> CPURunResult:
    return CPURunResult(
        run=run,
        run_dir=paths["run_dir"],
        metrics_path=paths["metrics"],
        events_path=paths["events"],
        checkpoint_dir=paths["checkpoints"],
        log_path=paths["log"] if log else None,
        wall_seconds=time.perf_counter() - started,
        error=error,
    )


def main_ppo_argv(run: CPURun, overrides: list[str]) -> list[str]:
    """``python -m verl.trainer.main_ppo`` with the run's config and ``overrides`` (CPU and GPU launchers)."""
    return [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        f"--config-path={run.resolved_config_dir()}",
        f"--config-name={run.config_name}",
        *overrides,
    ]


def main_ppo_command(run: CPURun, base_dir: Path, assets_dir: Path) -> list[str]:
    return main_ppo_argv(run, run_overrides(run, base_dir, assets_dir))


def run_main_ppo(
    run: CPURun, base_dir: Path, assets_dir: Path, echo: bool = False, timeout: Optional[float] = None
) -> CPURunResult:
    """Run ``python -m verl.trainer.main_ppo`` for ``run`` in a child process (its own Ray cluster).

    Output goes to ``<run dir>/main_ppo.log`` (and to this process's stdout too with ``echo``); the result
    carries :class:`verl_ext.cpu.run_monitor.RunMeasurements` (start-up, teardown, peak memory).
    """
    from verl_ext.cpu.run_monitor import run_and_measure

    paths = run_paths(base_dir, run)
    _prepare_run_dir(paths)
    env = {**os.environ, **cpu_environment(), "VERL_FILE_LOGGER_PATH": str(paths["metrics"])}
    started = time.perf_counter()
    measurements = run_and_measure(
        main_ppo_command(run, base_dir, assets_dir), env, paths["log"], paths["metrics"], echo=echo, timeout=timeout
    )
    error = None if measurements.returncode == 0 else f"main_ppo exited with status {measurements.returncode}"
    result = _result(run, paths, started, error, log=True)
    result.measurements = measurements
    return result


def compose_run_config(run: CPURun, base_dir: Path, assets_dir: Path):
    """The config ``main_ppo`` would compose for ``run`` (Hydra's compose API, same config and overrides)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(run.resolved_config_dir()), version_base=None):
        return compose(config_name=run.config_name, overrides=run_overrides(run, base_dir, assets_dir))


def ray_init_kwargs(config) -> dict[str, Any]:
    """What verl's ``run_ppo`` passes to ``ray.init`` for ``config`` (same runtime environment)."""
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    default_runtime_env = get_ppo_ray_runtime_env(config)
    ray_init = OmegaConf.to_container(config.ray_kwargs.get("ray_init", {}), resolve=True)
    if config.transfer_queue.enable:
        default_runtime_env.setdefault("env_vars", {})["TRANSFER_QUEUE_ENABLE"] = "1"
    runtime_env = OmegaConf.to_container(
        OmegaConf.merge(default_runtime_env, ray_init.get("runtime_env", {}) or {}), resolve=True
    )
    return {**ray_init, "runtime_env": runtime_env}


class CPURaySession:
    """One Ray cluster in this process for several CPU runs of verl's ``main_ppo`` (see the module docstring).

    Use as a context manager; ``run(CPURun(...))`` returns a :class:`CPURunResult`. Environment variables
    of the CPU profile are set in this process before Ray starts (Ray's workers inherit them), and
    ``VERL_FILE_LOGGER_ROOT`` points verl's file logger at ``base_dir``.
    """

    def __init__(self, base_dir: Path, assets_dir: Path, cleanup_timeout: float = 60.0, ray_overrides: Sequence[str] = ()):
        self.base_dir = Path(base_dir).resolve()
        self.assets_dir = Path(assets_dir).resolve()
        self.cleanup_timeout = cleanup_timeout
        # overrides of the config Ray is started from, e.g. "+ray_kwargs.ray_init.num_gpus=2" for runs whose
        # rollout engine has its own logical GPU (actor_rollout_ref.hybrid_engine=false)
        self.ray_overrides = tuple(ray_overrides)
        self._saved_environment: dict[str, Optional[str]] = {}
        self._saved_platform: Any = None
        self._started_ray = False

    def _set_environment(self) -> None:
        wanted: dict[str, Optional[str]] = {
            **cpu_environment(),
            "VERL_FILE_LOGGER_ROOT": str(self.base_dir),
            "VERL_FILE_LOGGER_PATH": None,
        }
        for name, value in wanted.items():
            self._saved_environment[name] = os.environ.get(name)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _restore_environment(self) -> None:
        for name, value in self._saved_environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _select_cpu_platform(self) -> None:
        """Make this (driver) process's verl platform the CPU one, whatever it resolved to before.

        verl resolves its platform once per process; if something imported verl's trainer before this
        session set ``VERL_PLATFORM=cpu``, the driver would hold the CUDA platform and ``main_ppo``'s
        ``auto_set_device`` would turn ``trainer.device`` into ``cuda``.
        """
        from verl.plugin.platform import platform_manager, set_platform

        from verl_ext.cpu.platform import cpu_platform_class

        self._saved_platform = platform_manager._current_platform
        if not isinstance(self._saved_platform, cpu_platform_class()):
            platform_manager._current_platform = None
            set_platform(cpu_platform_class()())

    def _restore_platform(self) -> None:
        from verl.plugin.platform import platform_manager

        platform_manager._current_platform = self._saved_platform

    def __enter__(self) -> "CPURaySession":
        import ray

        if ray.is_initialized():
            raise RuntimeError("CPURaySession starts its own Ray cluster; Ray is already initialised in this process")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._set_environment()
        self._select_cpu_platform()
        try:
            config = compose_run_config(CPURun(name="ray_init", overrides=self.ray_overrides), self.base_dir, self.assets_dir)
            ray.init(**ray_init_kwargs(config))
        except BaseException:
            self._restore_platform()
            self._restore_environment()
            raise
        self._started_ray = True
        self._total_resources = dict(ray.cluster_resources())
        return self

    def __exit__(self, *exc_info: Any) -> None:
        import ray

        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
        self._restore_platform()
        self._restore_environment()

    def run(self, run: CPURun) -> CPURunResult:
        """Compose ``run``'s config and run it through verl's ``main_ppo.main`` in this process."""
        from verl.trainer.main_ppo import main as main_ppo

        if not self._started_ray:
            raise RuntimeError("use CPURaySession as a context manager")
        paths = run_paths(self.base_dir, run)
        _prepare_run_dir(paths)
        started = time.perf_counter()
        error = None
        try:
            config = compose_run_config(run, self.base_dir, self.assets_dir)
            main_ppo(config)
        except Exception as exception:  # noqa: BLE001 -- reported in the result, with its type
            error = f"{type(exception).__name__}: {exception}"
        finally:
            self.wait_until_idle()
        return _result(run, paths, started, error, log=False)

    def wait_until_idle(self) -> None:
        """Block until the last run's actors and placement groups released their resources.

        verl's TaskRunner dies with its last handle (and its actors with it), but the placement groups
        its resource pools created belong to this driver's job and outlive it: remove them.
        """
        import ray
        from ray.util.placement_group import PlacementGroup, remove_placement_group

        from verl_ext.cpu.server_adapter import SERVER_NAME_PREFIX

        deadline = time.monotonic() + self.cleanup_timeout
        while time.monotonic() < deadline:
            for group_id, group in ray.util.placement_group_table().items():
                if group.get("state") not in ("REMOVED",):
                    remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(group_id))))
            available = ray.available_resources()
            released = all(
                available.get(name, 0.0) >= total - 1e-6
                for name, total in self._total_resources.items()
                if name in ("CPU", "GPU")
            )
            # the next run names its rollout server the same way: wait until the last one is gone
            servers = [
                actor for actor in ray.util.list_named_actors(all_namespaces=True)
                if str(actor.get("name", "")).startswith(SERVER_NAME_PREFIX)
            ]
            if released and not servers:
                return
            time.sleep(0.2)
        raise TimeoutError(
            f"Ray resources not released {self.cleanup_timeout:.0f}s after the run: {ray.available_resources()} "
            f"of {self._total_resources}"
        )


def run_all(runs: Sequence[CPURun], base_dir: Path, assets_dir: Path) -> list[CPURunResult]:
    """Run several CPU runs in one :class:`CPURaySession` (in order)."""
    with CPURaySession(base_dir, assets_dir) as session:
        return [session.run(run) for run in runs]
