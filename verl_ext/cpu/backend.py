"""The CPU backend for the launcher (:mod:`verl_ext.runs.launch`): verl's ``main_ppo`` on this machine's CPU.

Two uses, one profile (:mod:`verl_ext.cpu.profile`: the tiny model and the counting task, the CPU platform and
rollout, sized for the run's topology and batch):

- a run written for the CPU (``smoke=False``: the tests, the quickstart, the lab, ``verl-ext gpu-smoke --backend
  cpu``): the profile goes *under* the run's overrides, with the harness's defaults (2 steps, no validation, no
  checkpoint unless the run asks) and the rollout's weight-event log (:mod:`verl_ext.rollout_events`), so that
  what the run sets wins;
- a run script's CPU smoke (``smoke=True``, ``VERL_EXT_CPU_SMOKE=1``): the profile goes *over* the script's
  overrides, then the smoke caps (2 steps, no checkpoint, no resume), so that a GPU run stays small whatever it
  sets; the topology it keeps is the one its overrides set (``trainer.nnodes``, ``trainer.n_gpus_per_node``;
  world size 1 without them), and with ``split`` the engine on its own pool (one logical GPU, weights over
  verl-ext's ``gloo``).

The launcher checks a run on verl's CPU platform (:meth:`CPUBackend.as_driver`), as its driver will run.
Around the child process: the memory a world size needs is checked first, and a run with ``trainer.nnodes > 1``
runs in a local Ray cluster of that many nodes (:mod:`verl_ext.cpu.local_cluster`), started and stopped with it.
Importing this module does not import verl or torch.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from verl_ext.checkpoint_backends import CPU_BACKEND
from verl_ext.cpu.profile import cpu_environment, cpu_overrides, cpu_overrides_for
from verl_ext.cpu_runtime.topology import RAY_ADDRESS_ENV, Topology, check_memory
from verl_ext.runs.backend import HARNESS_DEFAULTS, SMOKE_CAPS, Backend, Surroundings
from verl_ext.runs.outputs import RunPaths
from verl_ext.overrides import hydra_string
from verl_ext.runs.run import Run
from verl_ext.staleness.config import engine_pool_overrides

EVENT_LOG_KEY = "+actor_rollout_ref.rollout.engine_kwargs.cpu.event_log"
# what a check sees as the address of the local cluster around() will start (its driver gets the real one)
CLUSTER_TO_START = "local-cluster-started-by-the-launcher"


@contextlib.contextmanager
def _variable(name: str, value: Optional[str]) -> Iterator[None]:
    """Within the block ``name=value`` in this process's environment when ``value`` is given and ``name`` unset."""
    if value is None or os.environ.get(name):
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


@dataclass(frozen=True)
class CPUBackend(Backend):
    """The CPU backend with the tiny assets in ``assets`` (module docstring)."""

    assets: Path
    smoke: bool = False
    split: bool = False  # smoke only: the rollout engine on its own logical GPU

    def environment(self) -> dict[str, Optional[str]]:
        return dict(cpu_environment())

    def before(self, run: Run, paths: RunPaths) -> list[str]:
        if self.smoke:
            return []
        return [*cpu_overrides_for(self.assets, run.overrides), *HARNESS_DEFAULTS,
                f"{EVENT_LOG_KEY}={hydra_string(str(paths.events))}"]

    def after(self, run: Run) -> list[str]:
        if not self.smoke:
            return []
        split = engine_pool_overrides(1, 1, CPU_BACKEND) if self.split else []
        topology = Topology.from_overrides([*run.overrides, *split])
        return [*cpu_overrides(self.assets, topology=topology), *split, *SMOKE_CAPS]

    @contextlib.contextmanager
    def as_driver(self, overrides: Sequence[str]) -> Iterator[None]:
        """verl's CPU platform, as the run's driver resolves it (``VERL_PLATFORM=cpu``), so that the launcher's check
        keeps ``trainer.device=cpu`` and applies every CPU-topology check; for a run of several nodes, the address of
        the local cluster :meth:`around` will start (``VERL_EXT_CPU_RAY_ADDRESS``, which its driver reads), unless
        one is set already."""
        from verl_ext.cpu_runtime.platform import hold_cpu_platform

        several_nodes = Topology.from_overrides(overrides).nnodes > 1
        with hold_cpu_platform(), _variable(RAY_ADDRESS_ENV, CLUSTER_TO_START if several_nodes else None):
            yield

    @contextlib.contextmanager
    def around(self, arguments: Sequence[str], paths: RunPaths) -> Iterator[Surroundings]:
        topology = Topology.from_overrides(arguments)
        check_memory(topology)  # before a cluster starts (main_ppo's driver checks it again)
        if topology.nnodes == 1:
            yield Surroundings()
            return
        from verl_ext.cpu.local_cluster import LocalRayCluster, cluster_processes

        print(f"[verl-ext] starting a local Ray cluster of {topology.nnodes} nodes", flush=True)
        with LocalRayCluster(topology.nnodes, topology.n_gpus_per_node, env=cpu_environment(),
                             log_dir=paths.run_dir / "ray_nodes") as cluster:
            yield Surroundings(environment=cluster.client_environment(),
                               also_measure=lambda: cluster_processes(cluster.marker))
