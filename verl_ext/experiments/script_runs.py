"""The run scripts' runs: a grid in the environment the scripts read -> its :class:`~verl_ext.runs.run.Run`\\ s,
and where they train (a backend) and write (the ``scripts`` layout of :class:`~verl_ext.runs.launch.Outputs`).

A run is a point of the grid (:mod:`verl_ext.runs.grid`: algorithm, setting, learning rate) on the grid's
profile. Its overrides, merged in this order, a key set later winning (:meth:`verl_ext.runs.run.Run.from_preset`):

1. the profile (Table 1 + our resources: data from ``DATA_DIR``, ``MODEL_PATH``, ``TOTAL_STEPS`` or the profile's
   steps, the KL measurement unless ``KL_TO_INITIAL=0``);
2. the algorithm preset, the staleness setting, the learning rate (when the grid sweeps it), zero-variance
   masking;
3. the environment: ``trainer.logger`` and, outside a smoke mode, the nodes (``trainer.nnodes``,
   ``trainer.n_gpus_per_node``) and with ``ENGINE_GPUS_PER_NODE`` the rollout engine on its own pool (weights
   through verl's ``nccl``; :func:`verl_ext.staleness.config.engine_pool_overrides`);
4. the figure's own overrides, then the user's (command-line) overrides.

The launcher adds the rest (:mod:`verl_ext.runs.launch`): the names, then in a smoke mode the backend's smoke
profile and caps (:func:`script_backend`: the CPU or GPU profile over the script's overrides, 2 steps, no
checkpoint, no resume; a CPU smoke keeps the topology the figure's or the user's overrides set -- world size 1
without them, not ``N_GPUS_PER_NODE``'s GPU default of 8, which is why the nodes of layer 3 are left out there --
and with ``ENGINE_GPUS_PER_NODE`` the split, one logical GPU for the engine, weights through verl-ext's ``gloo``),
then the checkpoint folder and verl's file-logger path.

Pure: nothing here composes a config, reads a file or starts a process.
"""

from __future__ import annotations

from typing import Optional

from verl_ext.checkpoint_backends import GPU_BACKEND
from verl_ext.experiments.environment import RunEnvironment
from verl_ext.experiments.profiles import Profile
from verl_ext.runs.grid import Grid, Point
from verl_ext.runs.launch import Backend, Outputs
from verl_ext.runs.names import check_name, run_name
from verl_ext.runs.overrides import hydra_list
from verl_ext.runs.run import Run
from verl_ext.staleness.config import engine_pool_overrides


def engine_overrides(environment: RunEnvironment) -> list[str]:
    """With ``ENGINE_GPUS_PER_NODE``: the rollout engine on its own pool, weights through verl's ``nccl``."""
    if not environment.engine_on_own_pool:
        return []
    return engine_pool_overrides(environment.engine_nnodes, environment.engine_gpus_per_node, GPU_BACKEND)


def environment_overrides(environment: RunEnvironment) -> list[str]:
    """Layer 3 of the module docstring."""
    nodes = [] if environment.smoke else [f"trainer.nnodes={environment.nnodes}",
                                          f"trainer.n_gpus_per_node={environment.n_gpus_per_node}"]
    return [f"trainer.logger={hydra_list(environment.logger)}", *nodes, *engine_overrides(environment)]


def script_backend(environment: RunEnvironment) -> Backend:
    """Where the environment's mode trains: verl's own GPUs, or the CPU or GPU smoke's backend (ValueError for a GPU
    smoke of a split, which needs a second GPU)."""
    if environment.smoke == "cpu":
        from verl_ext.cpu.backend import CPUBackend

        return CPUBackend(environment.tiny_assets, smoke=True, split=environment.engine_on_own_pool)
    if environment.smoke == "gpu":
        if environment.engine_on_own_pool:
            raise ValueError(
                f"ENGINE_GPUS_PER_NODE={environment.engine_gpus_per_node}: the GPU smoke runs on one GPU, and an engine "
                "on its own pool needs a second one; check the split with VERL_EXT_DRY_RUN=1 or VERL_EXT_CPU_SMOKE=1")
        from verl_ext.gpu.backend import GPUBackend

        return GPUBackend(environment.tiny_gpu_assets, smoke=True)
    return Backend()


def script_outputs(environment: RunEnvironment) -> Outputs:
    """``OUTPUT_DIR`` (or its ``cpu-smoke``/``gpu-smoke`` folder) in the run scripts' layout."""
    return Outputs(environment.outputs, layout="scripts")


def title(run: Run, environment: RunEnvironment) -> str:
    """How the launcher and the dry run name a run: ``project/name`` (and the smoke mode)."""
    return f"{run.project}/{run.name}" + (f" ({environment.smoke} smoke)" if environment.smoke else "")


def script_runs(
    grid: Grid,
    profile: Profile,
    environment: RunEnvironment,
    name_prefix: Optional[str] = None,
    name: Optional[str] = None,
) -> list[Run]:
    """Every run of ``grid`` (named ``grid.name``, its project) on ``profile`` in ``environment``, in the grid's order.

    ``name``: ``EXPERIMENT_NAME`` of a single run, its whole name; ``name_prefix``: ``EXPERIMENT_NAME`` of a grid,
    each run named ``<prefix>-<run name>``. ValueError naming what is wrong, before anything is composed."""
    check_name(grid.name, "project")
    masking = grid.zero_variance_masking

    def run_name_of(point: Point, rate: Optional[float]) -> str:
        full = run_name(point.algorithm, point.setting, learning_rate=rate, zero_variance_masking=masking)
        return name or (f"{name_prefix}-{full}" if name_prefix else full)

    choices = grid.choices()
    for point, rate, _ in choices:  # a prefix long enough to make a run name too long fails here, naming the variable
        check_name(run_name_of(point, rate), "EXPERIMENT_NAME" if name or name_prefix else "run name")
    if name and len(choices) > 1:
        raise ValueError(f"{grid.name}: EXPERIMENT_NAME={name!r} names {len(choices)} runs the same: use it for one run")
    base = profile.overrides(environment.data_dir, environment.model_path, environment.total_steps,
                             environment.kl_to_initial)
    layers = [*environment_overrides(environment), *grid.overrides]

    def build(point: Point, rate: Optional[float], seed: Optional[int]) -> Run:
        return Run.from_preset(run_name_of(point, rate), point.algorithm, point.setting, base=base, learning_rate=rate,
                               seed=seed, zero_variance_masking=masking, overrides=layers, project=grid.name,
                               profile=profile.name)

    return grid.runs(build, f"{grid.name}: the grid")
