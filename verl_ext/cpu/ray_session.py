"""Several CPU runs of verl's ``main_ppo`` in this process, sharing one Ray start-up: an executor of the one launcher.

:class:`CPURaySession` starts Ray once in this process; ``session.run(run)`` is
:func:`verl_ext.runs.launch.launch` on the CPU backend (:class:`verl_ext.cpu.backend.CPUBackend`) writing into
``<base_dir>`` in the ``per_run`` layout (:class:`verl_ext.runs.outputs.Outputs`), with the session as its
executor: the run is composed and checked as every run is (a refusal raises before anything is written), its folder
prepared, then its checked config goes to verl's own ``verl.trainer.main_ppo.main`` (the function Hydra wraps;
passed a composed config it runs it as is), which sees Ray already initialised and only creates its TaskRunner.
Between runs it waits until the previous run's actors are gone. This saves Ray's start and stop (about 10 s and
5-20 s on two cores) per run; the workers themselves (trainer, rollout server, agent-loop and reward workers) are new
processes for every run -- verl creates them in each TaskRunner, so they cannot be shared. The lab, the tests and the
benchmarks use it. A run writes ``<project>/<name>.jsonl`` (verl's file logger), ``<project>/<name>/rollout_events.jsonl``
(the CPU rollout's weight events), ``<project>/<name>/checkpoints``.

The session's topology sizes its Ray: a one-node Ray with ``n_gpus_per_node`` (+ ``engine_gpus``) logical GPUs,
or a :class:`~verl_ext.cpu.local_cluster.LocalRayCluster` of ``nnodes`` such nodes; each run must fit in it (a
smaller run fits; a larger one is refused before anything is written). A run with the rollout engine on its own
pool (``actor_rollout_ref.hybrid_engine=false``) also needs the engine's logical GPUs on its (one) node
(``Topology.engine_gpus``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from verl_ext.cpu.backend import CPUBackend
from verl_ext.cpu.profile import cpu_environment
from verl_ext.cpu_runtime.topology import Topology, check_memory
from verl_ext.runs.compose import LOGGER_PATH_VARIABLE, CheckedRun, ComposedRun, compose
from verl_ext.runs.launch import Execution, RunResult, launch
from verl_ext.runs.outputs import Outputs
from verl_ext.runs.run import Run


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


def start_ray(kwargs: dict[str, Any]) -> None:
    """``ray.init(**kwargs)`` for a new one-node Ray in this process. A node that stops at Ray's own 30-second
    registration limit (an overloaded machine: :data:`~verl_ext.cpu.local_cluster.RAY_NODE_START_TIMEOUT_TEXT`) is
    started again from nothing, saying so, up to :data:`~verl_ext.cpu.local_cluster.START_ATTEMPTS` times in all:
    what the failed start left (its GCS, raylet and agents, children of this process) is stopped first. Any other
    failure is raised as it is."""
    import psutil
    import ray

    from verl_ext.cpu.local_cluster import RAY_NODE_START_TIMEOUT_TEXT, START_ATTEMPTS

    for attempt in range(1, START_ATTEMPTS + 1):
        before = {child.pid for child in psutil.Process().children(recursive=True)}
        try:
            ray.init(**kwargs)
            return
        except Exception as error:  # noqa: BLE001 -- Ray raises a plain Exception for its start-up limit
            if RAY_NODE_START_TIMEOUT_TEXT not in str(error) or attempt == START_ATTEMPTS:
                raise
        left = [child for child in psutil.Process().children(recursive=True) if child.pid not in before]
        for child in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        psutil.wait_procs(left, timeout=10)
        ray.shutdown()  # whatever of the failed start ray.init recorded in this process
        print(f"[verl-ext] Ray: the node hit Ray's 30-second start-up limit (the machine is overloaded); starting it "
              f"again ({attempt + 1} of {START_ATTEMPTS})", file=sys.stderr, flush=True)


class CPURaySession:
    """One Ray cluster in this process for several CPU runs of verl's ``main_ppo`` (see the module docstring).

    Use as a context manager; ``run(Run(...))`` returns a :class:`~verl_ext.runs.launch.RunResult`. Environment variables
    of the CPU profile are set in this process before Ray starts (Ray's workers inherit them), and
    ``VERL_FILE_LOGGER_ROOT`` points verl's file logger at ``base_dir``. ``topology`` sizes the cluster: a
    one-node Ray with ``n_gpus_per_node`` (+ ``engine_gpus``) logical GPUs, or a :class:`~verl_ext.cpu.local_cluster.LocalRayCluster`
    of ``nnodes`` such nodes; each run must fit in it (a smaller run fits).
    """

    def __init__(self, base_dir: Path, assets_dir: Path, cleanup_timeout: float = 60.0, topology: Topology = Topology()):
        self.base_dir = Path(base_dir).resolve()
        self.assets_dir = Path(assets_dir).resolve()
        self.backend = CPUBackend(self.assets_dir)
        self.outputs = Outputs(self.base_dir)
        self.cleanup_timeout = cleanup_timeout
        self.topology = topology
        self.cluster = None  # a LocalRayCluster when the topology has several nodes
        self._saved_environment: dict[str, Optional[str]] = {}
        self._platform = contextlib.ExitStack()
        self._started_ray = False

    def _set_environment(self, extra: Optional[dict[str, str]] = None) -> None:
        wanted: dict[str, Optional[str]] = {
            **cpu_environment(),
            "VERL_FILE_LOGGER_ROOT": str(self.base_dir),
            LOGGER_PATH_VARIABLE: None,
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

    def __enter__(self) -> "CPURaySession":
        import ray

        from verl_ext.cpu.local_cluster import LocalRayCluster
        from verl_ext.cpu_runtime.platform import hold_cpu_platform
        from verl_ext.cpu.ray_loopback import loopback_in_this_process

        if ray.is_initialized():
            raise RuntimeError("CPURaySession starts its own Ray cluster; Ray is already initialised in this process")
        check_memory(self.topology)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._set_environment()
        self._platform.enter_context(hold_cpu_platform())  # the driver here is a CPU run's driver
        self._platform.enter_context(loopback_in_this_process())  # its Ray on loopback (verl_ext.cpu.ray_loopback)
        try:
            if self.topology.nnodes > 1:
                # its nodes inherit this process's environment: the CPU profile's and the file logger's root
                self.cluster = LocalRayCluster(
                    self.topology.nnodes, self.topology.n_gpus_per_node, log_dir=self.base_dir / "ray_nodes"
                ).start()
                self._set_environment(self.cluster.client_environment())  # saved, restored on exit
                self.cluster.join_from_this_process()
            config = compose(Run(name="ray_init", overrides=tuple(self.topology.overrides())), self.backend,
                             self.outputs).config()
            kwargs = ray_init_kwargs(config)
            # each run's metrics go to their own file (VERL_FILE_LOGGER_ROOT above), not one for the whole session
            kwargs["runtime_env"].get("env_vars", {}).pop(LOGGER_PATH_VARIABLE, None)
            start_ray(kwargs)
        except BaseException:
            self._stop_cluster()
            self._platform.close()
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
            self._platform.close()
            self._restore_environment()

    def check_fits(self, run: Run) -> None:
        """A run whose topology this session's Ray cannot place is refused, naming its keys."""
        needed, have = Topology.from_overrides(run.overrides), self.topology
        if not needed.fits_in(have):
            engine = f" + {needed.engine_gpus} engine GPU(s) of its own pool" if needed.engine_gpus else ""
            have_engine = f" + {have.engine_gpus} for an engine's own pool" if have.engine_gpus else ""
            raise ValueError(
                f"CPU run {run.name!r}: trainer.nnodes={needed.nnodes} trainer.n_gpus_per_node={needed.n_gpus_per_node}"
                f"{engine} does not fit this CPURaySession ({have.nnodes} node(s) of {have.n_gpus_per_node} logical "
                f"GPU(s){have_engine}): give the session a topology at least as large"
            )

    def run(self, run: Run, keep_with_run: Sequence[Path] = ()) -> RunResult:
        """``run`` through the one launcher on the CPU backend, executed in this process (module docstring);
        ``keep_with_run``: the caller's files that describe the run (:func:`verl_ext.runs.launch.start`)."""
        return launch(run, self.backend, self.outputs, executor=self, keep_with_run=keep_with_run)

    def admit(self, composed: ComposedRun) -> None:
        """The launcher's executor: a run this session cannot hold is refused before anything is written."""
        if not self._started_ray:
            raise RuntimeError("use CPURaySession as a context manager")
        self.check_fits(composed.run)

    def execute(self, checked: CheckedRun) -> Execution:
        """The launcher's executor: verl's ``main_ppo.main`` on the checked config, in this process."""
        from verl.trainer.main_ppo import main as main_ppo

        from verl_ext.runs.monitor import ProcessSampler, RunMeasurements

        started = time.perf_counter()
        error = None
        with ProcessSampler(self._processes()) as sampler:  # this driver, the Ray it started or the cluster's nodes
            try:
                main_ppo(checked.config)
            except Exception as exception:  # noqa: BLE001 -- reported in the result, with its type
                error = f"{type(exception).__name__}: {exception}"
            # not after Ctrl-C or SIGTERM (a BaseException): the session's exit shuts Ray down, the run's actors with it
            self.wait_until_idle()
        measurements = RunMeasurements(
            returncode=0 if error is None else 1,
            wall_seconds=time.perf_counter() - started,
            peak_rss_bytes=sampler.peak_rss,
            peak_pss_bytes=sampler.peak_pss,
            cpu_seconds=sampler.cpu_seconds,
            first_record_seconds=None,
            last_record_seconds=None,
        )
        return Execution(measurements, error)

    def _processes(self):
        from verl_ext.cpu.local_cluster import cluster_processes
        from verl_ext.runs.monitor import this_process_tree

        cluster = self.cluster
        return this_process_tree(also=(lambda: cluster_processes(cluster.marker)) if cluster is not None else None)

    def wait_until_idle(self) -> None:
        """Block until the last run's actors and placement groups released their resources.

        verl's TaskRunner dies with its last handle (and its actors with it), but the placement groups
        its resource pools created belong to this driver's job and outlive it: remove them.
        """
        import ray
        from ray.util.placement_group import PlacementGroup, remove_placement_group

        from verl_ext.cpu_runtime.server_adapter import SERVER_NAME_PREFIX

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
