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

The topology is the run's own ``trainer.nnodes`` / ``trainer.n_gpus_per_node`` (world size 1 when it sets
neither): the CPU profile is sized for it (:func:`verl_ext.cpu.profile.cpu_overrides_for`). With more than
one node, :func:`run_main_ppo` runs ``main_ppo`` inside a :class:`~verl_ext.cpu.local_cluster.LocalRayCluster`
of that many nodes, stopped afterwards; a :class:`CPURaySession` is given its topology (the largest its runs
need) and starts such a cluster when it has several nodes. A run with the rollout engine on its own pool
(``actor_rollout_ref.hybrid_engine=false``) also needs the engine's logical GPUs on its (one) node: its topology
counts them (``Topology.engine_gpus``), and so must the session's.

Each run writes into ``<base_dir>/<project>/``: ``<name>.jsonl`` (verl's file logger: every step's
metrics), ``<name>/rollout_events.jsonl`` (the CPU rollout's weight events), ``<name>/checkpoints``
(``trainer.default_local_dir``) and, for child processes, ``<name>/main_ppo.log``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from verl_ext.cpu.profile import cpu_environment, cpu_overrides_for
from verl_ext.cpu.rollout_events import read_rollout_events
from verl_ext.cpu.topology import Topology, check_memory
from verl_ext.runs import main_ppo
from verl_ext.runs.overrides import merge_overrides
from verl_ext.runs.names import check_name
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
        check_name(self.name, "CPURun name")  # the run names' one alphabet (verl_ext.runs.names.SAFE)
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"CPURun {self.name!r}: steps must be an integer >= 1, got {self.steps!r}")
        if isinstance(self.overrides, str):
            raise TypeError(f"CPURun {self.name!r}: overrides must be a sequence of 'key=value' strings, not one string")
        self.topology  # a topology key that is not an integer >= 1 is refused now, naming the key

    @property
    def topology(self) -> Topology:
        """The run's ``trainer.nnodes`` x ``trainer.n_gpus_per_node`` (1 x 1 unless its overrides set them)."""
        return Topology.from_overrides(self.overrides)

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
    measurements: Optional[Any] = None  # RunMeasurements: wall, CPU time and peak memory of every process of the run
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


LOGGER_PATH_KEY = "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"


def run_overrides(run: CPURun, base_dir: Path, assets_dir: Path) -> list[str]:
    """The full override list of ``run``: CPU profile (sized for the run's topology and batch sizes), then
    bookkeeping, then the run's own overrides."""
    paths = run_paths(base_dir, run)
    bookkeeping = bookkeeping_overrides(run, paths, PROJECT_NAME)
    bookkeeping.append(f"+actor_rollout_ref.rollout.engine_kwargs.cpu.event_log={paths['events']}")
    return merge_overrides(cpu_overrides_for(assets_dir, run.overrides), bookkeeping, run.overrides)


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


def main_ppo_arguments(run: CPURun, base_dir: Path, assets_dir: Path) -> list[str]:
    """The arguments of ``main_ppo`` for ``run`` (:func:`verl_ext.runs.main_ppo.arguments`; what the dry run checks):
    its config, its overrides, and the metrics path in the Ray job's environment (verl's file logger runs in the
    TaskRunner, which on a cluster's node does not see the driver's)."""
    logger_path = f"{LOGGER_PATH_KEY}={run_paths(base_dir, run)['metrics']}"
    overrides = merge_overrides(run_overrides(run, base_dir, assets_dir), [logger_path])
    return main_ppo.arguments(run.resolved_config_dir(), run.config_name, overrides)


def main_ppo_command(run: CPURun, base_dir: Path, assets_dir: Path) -> list[str]:
    """The child-process command of ``run``: ``python -m verl.trainer.main_ppo`` with :func:`main_ppo_arguments`."""
    return main_ppo.command(main_ppo_arguments(run, base_dir, assets_dir))


def run_main_ppo(
    run: CPURun, base_dir: Path, assets_dir: Path, echo: bool = False, timeout: Optional[float] = None
) -> CPURunResult:
    """Run ``python -m verl.trainer.main_ppo`` for ``run`` in a child process (its own Ray cluster).

    Output goes to ``<run dir>/main_ppo.log`` (and to this process's stdout too with ``echo``); the result
    carries :class:`verl_ext.cpu.run_monitor.RunMeasurements` (start-up, teardown, peak memory). With
    ``trainer.nnodes > 1`` the run joins a local cluster of that many nodes started for it (its start and
    stop count in the result's ``wall_seconds``, not in the measurements; its processes' CPU time and memory
    while the run lasts do).
    """
    from contextlib import nullcontext

    from verl_ext.cpu.local_cluster import LocalRayCluster, cluster_processes
    from verl_ext.cpu.run_monitor import run_and_measure

    paths = run_paths(base_dir, run)
    _prepare_run_dir(paths)
    command = main_ppo_command(run, base_dir, assets_dir)  # a bad topology or batch size fails here, before Ray
    env = {**os.environ, **cpu_environment(), "VERL_FILE_LOGGER_PATH": str(paths["metrics"])}
    topology = run.topology
    check_memory(topology)  # before a cluster starts (main_ppo's driver checks it again)
    started = time.perf_counter()
    cluster = (
        LocalRayCluster(topology.nnodes, topology.n_gpus_per_node, env=cpu_environment(), log_dir=paths["run_dir"] / "ray_nodes")
        if topology.nnodes > 1
        else nullcontext()
    )
    with cluster:
        also_measure = None
        if topology.nnodes > 1:
            env.update(cluster.client_environment())
            also_measure = lambda: cluster_processes(cluster.marker)  # noqa: E731 -- the cluster's raylets and workers
        measurements = run_and_measure(
            command, env, paths["log"], paths["metrics"], echo=echo, timeout=timeout, also_measure=also_measure
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
    ``VERL_FILE_LOGGER_ROOT`` points verl's file logger at ``base_dir``. ``topology`` sizes the cluster: a
    one-node Ray with ``n_gpus_per_node`` (+ ``engine_gpus``) logical GPUs, or a :class:`~verl_ext.cpu.local_cluster.LocalRayCluster`
    of ``nnodes`` such nodes; each run must fit in it (a smaller run fits).
    """

    def __init__(self, base_dir: Path, assets_dir: Path, cleanup_timeout: float = 60.0, topology: Topology = Topology()):
        self.base_dir = Path(base_dir).resolve()
        self.assets_dir = Path(assets_dir).resolve()
        self.cleanup_timeout = cleanup_timeout
        self.topology = topology
        self.cluster = None  # a LocalRayCluster when the topology has several nodes
        self._saved_environment: dict[str, Optional[str]] = {}
        self._saved_platform: Any = None
        self._started_ray = False

    def _set_environment(self, extra: Optional[dict[str, str]] = None) -> None:
        wanted: dict[str, Optional[str]] = {
            **cpu_environment(),
            "VERL_FILE_LOGGER_ROOT": str(self.base_dir),
            "VERL_FILE_LOGGER_PATH": None,
            **(extra or {}),
        }
        for name, value in wanted.items():
            self._saved_environment.setdefault(name, os.environ.get(name))
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

        from verl_ext.cpu.local_cluster import LocalRayCluster

        if ray.is_initialized():
            raise RuntimeError("CPURaySession starts its own Ray cluster; Ray is already initialised in this process")
        check_memory(self.topology)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._set_environment()
        self._select_cpu_platform()
        try:
            if self.topology.nnodes > 1:
                # its nodes inherit this process's environment: the CPU profile's and the file logger's root
                self.cluster = LocalRayCluster(
                    self.topology.nnodes, self.topology.n_gpus_per_node, log_dir=self.base_dir / "ray_nodes"
                ).start()
                self._set_environment(self.cluster.client_environment())  # saved, restored on exit
                self.cluster.join_from_this_process()
            config = compose_run_config(CPURun(name="ray_init", overrides=tuple(self.topology.overrides())),
                                        self.base_dir, self.assets_dir)
            ray.init(**ray_init_kwargs(config))
        except BaseException:
            self._stop_cluster()
            self._restore_platform()
            self._restore_environment()
            raise
        self._started_ray = True
        self._total_resources = dict(ray.cluster_resources())
        return self

    def _stop_cluster(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None

    def __exit__(self, *exc_info: Any) -> None:
        import ray

        try:
            if self._started_ray:
                ray.shutdown()
                self._started_ray = False
        finally:
            self._stop_cluster()
            self._restore_platform()
            self._restore_environment()

    def check_fits(self, run: CPURun) -> None:
        """A run whose topology this session's Ray cannot place is refused, naming its keys."""
        needed, have = run.topology, self.topology
        if not needed.fits_in(have):
            engine = f" + {needed.engine_gpus} engine GPU(s) of its own pool" if needed.engine_gpus else ""
            have_engine = f" + {have.engine_gpus} for an engine's own pool" if have.engine_gpus else ""
            raise ValueError(
                f"CPU run {run.name!r}: trainer.nnodes={needed.nnodes} trainer.n_gpus_per_node={needed.n_gpus_per_node}"
                f"{engine} does not fit this CPURaySession ({have.nnodes} node(s) of {have.n_gpus_per_node} logical "
                f"GPU(s){have_engine}): give the session a topology at least as large"
            )

    def run(self, run: CPURun) -> CPURunResult:
        """Compose ``run``'s config and run it through verl's ``main_ppo.main`` in this process."""
        from verl.trainer.main_ppo import main as main_ppo

        from verl_ext.cpu.run_monitor import ProcessSampler, RunMeasurements

        if not self._started_ray:
            raise RuntimeError("use CPURaySession as a context manager")
        self.check_fits(run)
        paths = run_paths(self.base_dir, run)
        _prepare_run_dir(paths)
        started = time.perf_counter()
        error = None
        with ProcessSampler(self._processes()) as sampler:  # this driver, the Ray it started or the cluster's nodes
            try:
                config = compose_run_config(run, self.base_dir, self.assets_dir)
                main_ppo(config)
            except Exception as exception:  # noqa: BLE001 -- reported in the result, with its type
                error = f"{type(exception).__name__}: {exception}"
            # not after Ctrl-C or SIGTERM (a BaseException): the session's exit shuts Ray down, the run's actors with it
            self.wait_until_idle()
        result = _result(run, paths, started, error, log=False)
        result.measurements = RunMeasurements(
            returncode=0 if error is None else 1,
            wall_seconds=result.wall_seconds,
            peak_rss_bytes=sampler.peak_rss,
            peak_pss_bytes=sampler.peak_pss,
            cpu_seconds=sampler.cpu_seconds,
            first_record_seconds=None,
            last_record_seconds=None,
        )
        return result

    def _processes(self):
        from verl_ext.cpu.local_cluster import cluster_processes
        from verl_ext.cpu.run_monitor import this_process_tree

        cluster = self.cluster
        return this_process_tree(also=(lambda: cluster_processes(cluster.marker)) if cluster is not None else None)

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
    """Run several CPU runs in one :class:`CPURaySession` (in order), sized for the largest of them."""
    topology = Topology(
        max(run.topology.nnodes for run in runs),
        max(run.topology.n_gpus_per_node for run in runs),
        max(run.topology.gpus_per_node for run in runs) - max(run.topology.n_gpus_per_node for run in runs),
    )
    with CPURaySession(base_dir, assets_dir, topology=topology) as session:
        return [session.run(run) for run in runs]
