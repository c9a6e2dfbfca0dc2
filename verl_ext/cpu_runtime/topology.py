"""The CPU backend's topology: how many trainer ranks and Ray nodes a run asks for, what the CPU profile
derives from it, and what is refused before Ray starts.

A GPU user writes ``trainer.nnodes=N trainer.n_gpus_per_node=G``; a CPU run takes the same keys. verl's
resource pool then asks Ray for N placement groups of G bundles, each bundle one logical GPU (the CPU
platform's Ray resource is ``"GPU"``, which Ray does not check exists) and ``max_colocate_count`` = 3
logical CPUs. The world size W = N x G is the number of FSDP2 ranks (gloo) and, with the CPU rollout's one
process per replica, the number of rollout replicas: replica i is trainer rank i's, on that rank's node.

What the CPU profile derives from the topology (:func:`derived_sizes`), so that the user's two keys are
all a larger run needs:

- per node, G logical GPUs and ``16 + 3 (G - 1)`` logical CPUs (each extra bundle takes 3; the 16 of a
  one-rank run leave room for the TaskRunner, TransferQueue, agent-loop and reward workers);
- with the rollout engine on its own pool (``actor_rollout_ref.hybrid_engine=false``, the explorer/trainer
  split), E = ``rollout.nnodes`` x ``rollout.n_gpus_per_node`` more logical GPUs on the (one) node, and 2
  logical CPUs for each (verl's standalone replicas ask for bundles of ``max_colocate_count`` = 2): the
  trainer ranks keep their G, the engine's replicas (one per logical GPU, the CPU rollout having one process
  per replica) get the E;
- ``ppo_micro_batch_size_per_gpu = ppo_mini_batch_size x n / W`` and
  ``log_prob_micro_batch_size_per_gpu = train_batch_size x n / W``: every rank's share in one pass, as at
  W = 1;
- ``rollout.agent.num_workers = W``: verl splits each batch over its agent-loop workers (placed round robin
  over the nodes), so a larger run also spreads batches over several workers.

N > 1 needs a Ray cluster of N nodes: verl itself checks only the total number of GPUs, so N placement
groups would all be packed onto the one node ``ray.init()`` starts. :mod:`verl_ext.cpu.local_cluster`
starts such a cluster on this machine and publishes its address in :data:`RAY_ADDRESS_ENV`, which the
profile's ``ray_kwargs.ray_init.address`` reads (``local`` otherwise: a one-node CPU run always starts its
own Ray and never attaches to a cluster someone else started on this machine).

:func:`check_cpu_topology` (called by :mod:`verl_ext.driver_checks` in the driver, before Ray) refuses what
would otherwise fail after Ray started, or hang: a tensor/data/pipeline-parallel rollout (the CPU rollout
has one process per replica), N > 1 without such a cluster, more GPUs or bundle CPUs per node than Ray is
given (verl's placement group would wait forever), an engine on its own pool with N > 1 (the local
cluster's nodes have the trainer's logical GPUs only).

Importing this module does not import verl.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from verl_ext.config_values import ConfigError, is_int, reject, require_int
from verl_ext.overrides import override_value

NNODES = "trainer.nnodes"
N_GPUS_PER_NODE = "trainer.n_gpus_per_node"
RAY_ADDRESS = "ray_kwargs.ray_init.address"
RAY_NUM_CPUS = "ray_kwargs.ray_init.num_cpus"
RAY_NUM_GPUS = "ray_kwargs.ray_init.num_gpus"
RAY_DASHBOARD = "ray_kwargs.ray_init.include_dashboard"
TRAIN_BATCH_SIZE = "data.train_batch_size"
ROLLOUT_N = "actor_rollout_ref.rollout.n"
MINI_BATCH_SIZE = "actor_rollout_ref.actor.ppo_mini_batch_size"
HYBRID_ENGINE = "actor_rollout_ref.hybrid_engine"
ENGINE_NNODES = "actor_rollout_ref.rollout.nnodes"
ENGINE_GPUS_PER_NODE = "actor_rollout_ref.rollout.n_gpus_per_node"
ROLLOUT_PARALLEL_SIZES = tuple(
    f"actor_rollout_ref.rollout.{name}"
    for name in ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size")
)

# The environment variable holding the address of the Ray cluster a multi-node CPU run joins (set by
# verl_ext.cpu.local_cluster for what runs inside it); "local": start a new one-node Ray.
RAY_ADDRESS_ENV = "VERL_EXT_CPU_RAY_ADDRESS"
LOCAL_RAY = "local"
# verl's ResourcePoolManager bundles: {"CPU": max_colocate_count, "GPU": 1} per trainer rank
BUNDLE_CPUS = 3
# the logical CPUs of a one-rank CPU run (room for the TaskRunner and the other single workers)
BASE_CPUS = 16
# verl's standalone rollout replicas (the engine on its own pool): bundles {"CPU": 2, "GPU": 1}
ENGINE_BUNDLE_CPUS = 2
# what verl's actors hold besides the bundles: the TaskRunner (num_cpus=1) and each reward worker (num_cpus=1)
TASK_RUNNER_CPUS = 1
# Memory of a CPU run on the tiny model, measured (benchmarks/bench_scale.py, peak PSS of every process):
# 5.5 GiB at world size 1, 7.1 at 2 -- each further rank adds a trainer worker, a rollout server and an
# agent-loop worker. Rounded down: a lower bound of what a run needs (a larger model needs more).
RUN_GIB, RANK_GIB = 5.0, 1.5


@dataclass(frozen=True)
class Topology:
    """``trainer.nnodes`` x ``trainer.n_gpus_per_node``: the trainer ranks of a run and the nodes they are on;
    ``engine_gpus``: the logical GPUs of the rollout engine's own pool (0: the engine is colocated with the
    actor, ``hybrid_engine=true``)."""

    nnodes: int = 1
    n_gpus_per_node: int = 1
    engine_gpus: int = 0

    def __post_init__(self) -> None:
        for key, value in ((NNODES, self.nnodes), (N_GPUS_PER_NODE, self.n_gpus_per_node)):
            require_int(key, value, 1)
        require_int(f"{ENGINE_NNODES} x {ENGINE_GPUS_PER_NODE}", self.engine_gpus, 0)

    @property
    def gpus_per_node(self) -> int:
        """Ray's logical GPUs on one node: the trainer's, and the engine's own pool's (one node only)."""
        return self.n_gpus_per_node + self.engine_gpus

    @property
    def world_size(self) -> int:
        return self.nnodes * self.n_gpus_per_node

    @property
    def rollout_replicas(self) -> int:
        """The CPU rollout's replicas (one process each): one per trainer rank, or one per engine GPU of its own pool."""
        return self.engine_gpus or self.world_size

    @property
    def memory_lower_bound_gib(self) -> float:
        """Memory a CPU run of this world size needs at least, every node being on this machine."""
        return RUN_GIB + RANK_GIB * (self.world_size - 1)

    @property
    def logical_cpus_per_node(self) -> int:
        """Ray's logical CPUs on each node: the one-rank run's 16, plus 3 for every further trainer bundle and 2
        for every engine bundle."""
        return BASE_CPUS + BUNDLE_CPUS * (self.n_gpus_per_node - 1) + ENGINE_BUNDLE_CPUS * self.engine_gpus

    @classmethod
    def from_overrides(cls, overrides: Iterable[str], default: "Topology | None" = None) -> "Topology":
        """The topology Hydra overrides set (the last value of each key wins, as in Hydra); ``default``'s
        value for a key they do not set. A value that is not an integer >= 1 raises, naming the key.

        The engine's pool counts with ``actor_rollout_ref.hybrid_engine=false`` only, sized as verl sizes it
        (``rollout.nnodes``, default 0, x ``rollout.n_gpus_per_node``, default ``trainer.n_gpus_per_node``); a
        value that is no count leaves it 0 here: the driver's delayed_sync checks name the key."""
        default = default or cls()
        values = {NNODES: default.nnodes, N_GPUS_PER_NODE: default.n_gpus_per_node}
        overrides = list(overrides)
        for key in values:
            text = override_value(overrides, key)
            if text is not None:
                try:
                    values[key] = int(text)
                except ValueError:
                    reject(key, text, "an integer >= 1")
        engine_gpus = default.engine_gpus
        hybrid = override_value(overrides, HYBRID_ENGINE)
        if hybrid is not None:
            engine_gpus = 0
            if hybrid.strip().lower() == "false":
                nodes = _count(override_value(overrides, ENGINE_NNODES), 0)
                per_node = _count(override_value(overrides, ENGINE_GPUS_PER_NODE), values[N_GPUS_PER_NODE])
                engine_gpus = nodes * per_node
        return cls(values[NNODES], values[N_GPUS_PER_NODE], engine_gpus)

    def overrides(self) -> list[str]:
        engine = (
            [f"{HYBRID_ENGINE}=false", f"{ENGINE_NNODES}=1", f"{ENGINE_GPUS_PER_NODE}={self.engine_gpus}"]
            if self.engine_gpus
            else []
        )
        return [f"{NNODES}={self.nnodes}", f"{N_GPUS_PER_NODE}={self.n_gpus_per_node}", *engine]

    def fits_in(self, other: "Topology") -> bool:
        """Whether a run of this topology can be placed in a Ray sized for ``other``."""
        return (
            self.nnodes <= other.nnodes
            and self.n_gpus_per_node <= other.n_gpus_per_node
            and self.gpus_per_node <= other.gpus_per_node
        )


def _count(text: str | None, default: int) -> int:
    """An engine-pool count as an override writes it; ``default`` when unset, 0 when it is no count >= 0."""
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        return 0
    return max(value, 0)


def per_rank(total: int, topology: Topology, what: str) -> int:
    """``total / W``; a :class:`ConfigError` naming ``what`` and the topology when W does not divide it."""
    if total % topology.world_size:
        raise ConfigError(
            f"{what} = {total} does not split evenly over trainer.nnodes x trainer.n_gpus_per_node = "
            f"{topology.nnodes} x {topology.n_gpus_per_node} = {topology.world_size} trainer ranks: choose a "
            f"world size that divides it, or change {TRAIN_BATCH_SIZE} / {ROLLOUT_N} / {MINI_BATCH_SIZE}"
        )
    return total // topology.world_size


@dataclass(frozen=True)
class DerivedSizes:
    """The profile's values that depend on the topology (see the module docstring)."""

    actor_micro_batch_per_rank: int
    log_prob_micro_batch_per_rank: int
    agent_loop_workers: int


def derived_sizes(topology: Topology, train_batch_size: int, rollout_n: int, mini_batch_size: int) -> DerivedSizes:
    responses = train_batch_size * rollout_n
    return DerivedSizes(
        actor_micro_batch_per_rank=per_rank(
            mini_batch_size * rollout_n, topology, f"the responses of a mini-batch ({MINI_BATCH_SIZE} x {ROLLOUT_N})"
        ),
        log_prob_micro_batch_per_rank=per_rank(responses, topology, f"the responses of a step ({TRAIN_BATCH_SIZE} x {ROLLOUT_N})"),
        agent_loop_workers=topology.world_size,
    )


def ray_init_overrides(topology: Topology) -> list[str]:
    """How the driver's ``ray.init`` is told where to run: a new one-node Ray with the logical resources of
    ``topology``; for several nodes, the cluster in :data:`RAY_ADDRESS_ENV` (Ray refuses resource counts
    when it joins an existing cluster: its nodes were started with them)."""
    if topology.nnodes == 1:
        return [
            f"+{RAY_ADDRESS}={LOCAL_RAY}",
            f"{RAY_NUM_CPUS}={topology.logical_cpus_per_node}",
            f"+{RAY_NUM_GPUS}={topology.gpus_per_node}",
            f"+{RAY_DASHBOARD}=False",
        ]
    return [f"+{RAY_ADDRESS}=${{oc.env:{RAY_ADDRESS_ENV},{LOCAL_RAY}}}", f"{RAY_NUM_CPUS}=null"]


def _select(config: Any, key: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(config, key, default=None)


def is_cpu_run(config: Any) -> bool:
    """The CPU profile's mark on a config: ``trainer.device=cpu``."""
    return str(_select(config, "trainer.device") or "").lower() == "cpu"


def check_cpu_rollout_parallelism(config: Any) -> None:
    """The CPU rollout runs one process per replica: tensor, data and pipeline parallel sizes must be 1; its
    options (``rollout.engine_kwargs.cpu``) are ones it has, with values it can use."""
    if _select(config, "actor_rollout_ref.rollout.name") != "cpu":
        return
    for key in ROLLOUT_PARALLEL_SIZES:
        value = _select(config, key)
        if value is not None and value != 1:
            reject(
                key,
                value,
                "1",
                "The CPU rollout (actor_rollout_ref.rollout.name=cpu) runs each replica in one process and cannot "
                "shard a model over ranks; with one replica per trainer rank, trainer.n_gpus_per_node x "
                "trainer.nnodes already gives several replicas.",
            )
    options = _select(config, "actor_rollout_ref.rollout.engine_kwargs.cpu")
    if options:
        from omegaconf import OmegaConf

        from verl_ext.cpu_runtime.rollout_server import check_engine_options  # torch and transformers, no verl

        check_engine_options(OmegaConf.to_container(options, resolve=True) if OmegaConf.is_config(options) else dict(options))


def check_memory(topology: Topology, total_bytes: int | None = None) -> None:
    """Refuse a world size whose CPU run cannot fit in this machine's memory even at the tiny model's needs
    (every rank's processes run here; Ray's memory monitor would kill workers and verl would wait for them)."""
    if total_bytes is None:
        import psutil

        total_bytes = psutil.virtual_memory().total
    total_gib = total_bytes / 2**30
    if topology.memory_lower_bound_gib > total_gib:
        most = int((total_gib - RUN_GIB) // RANK_GIB) + 1
        reject(
            N_GPUS_PER_NODE if topology.nnodes == 1 else f"{NNODES} x {N_GPUS_PER_NODE}",
            f"{topology.nnodes} x {topology.n_gpus_per_node}" if topology.nnodes > 1 else topology.n_gpus_per_node,
            f"a world size of at most {max(most, 0)} on this machine ({total_gib:.0f} GiB)",
            f"A CPU run needs at least {RUN_GIB:g} GiB plus {RANK_GIB:g} GiB per further trainer rank (its trainer "
            f"worker, rollout server and agent-loop worker; measured on the tiny model): "
            f"{topology.memory_lower_bound_gib:g} GiB for {topology.world_size} ranks.",
        )


def check_cpu_topology(config: Any) -> None:
    """What a CPU run's topology needs from Ray, checked before Ray starts (see the module docstring)."""
    check_cpu_rollout_parallelism(config)
    if not is_cpu_run(config):
        return
    nnodes, gpus = _select(config, NNODES), _select(config, N_GPUS_PER_NODE)
    if not (is_int(nnodes) and is_int(gpus)):
        return  # check_batch_arithmetic names them
    topology = Topology(nnodes, gpus, engine_gpus_of(config))
    check_memory(topology)
    address = _select(config, RAY_ADDRESS)
    starts_its_own_ray = address in (None, "", LOCAL_RAY)
    if topology.engine_gpus and topology.nnodes > 1:
        reject(
            NNODES,
            topology.nnodes,
            f"1 on a CPU run with the rollout engine on its own pool ({HYBRID_ENGINE}=false)",
            "The nodes of a local CPU cluster have the trainer's logical GPUs only: the engine's replicas would "
            "wait for a GPU forever. Put the trainer ranks on one node (trainer.n_gpus_per_node) with the engine "
            "beside them, or colocate the engine.",
        )
    if topology.nnodes > 1 and starts_its_own_ray:
        reject(
            NNODES,
            topology.nnodes,
            f"1 on a CPU run whose Ray starts in the driver ({RAY_ADDRESS}={address})",
            f"verl would pack all {topology.nnodes} 'nodes' onto the one Ray node ray.init() starts. Run it in a "
            f"local cluster of {topology.nnodes} Ray nodes: python -m verl_ext.cpu.quickstart and "
            "verl_ext's launcher (verl_ext.runs.launch) start one themselves; for any other command, "
            f"python -m verl_ext.cpu.local_cluster --nodes {topology.nnodes} --gpus-per-node {topology.n_gpus_per_node} "
            "-- <command> (it sets " + RAY_ADDRESS_ENV + ", which the CPU profile's " + RAY_ADDRESS + " reads).",
        )
    if not starts_its_own_ray:
        return  # a cluster's nodes were sized when they started (verl_ext.cpu.local_cluster sizes them)
    ray_gpus = _select(config, RAY_NUM_GPUS)
    engine = f" + {ENGINE_NNODES} x {ENGINE_GPUS_PER_NODE} = {topology.gpus_per_node}" if topology.engine_gpus else ""
    if ray_gpus is None or not isinstance(ray_gpus, (int, float)) or ray_gpus < topology.gpus_per_node:
        reject(
            RAY_NUM_GPUS,
            ray_gpus,
            f"at least {N_GPUS_PER_NODE}{engine}" if engine else f"at least {N_GPUS_PER_NODE} = {topology.n_gpus_per_node}",
            "A CPU run's logical GPUs place its trainer ranks and the replicas of an engine on its own pool (the CPU "
            "profile sets it from trainer.n_gpus_per_node and the engine's pool when those keys come before it; put "
            "the profile after them or derive it again). verl would refuse it only after Ray started, or wait "
            "forever for the engine's GPUs.",
        )
    ray_cpus = _select(config, RAY_NUM_CPUS)
    needed = BUNDLE_CPUS * topology.n_gpus_per_node + ENGINE_BUNDLE_CPUS * topology.engine_gpus + TASK_RUNNER_CPUS
    engine_cpus = f" + {ENGINE_BUNDLE_CPUS} x {topology.engine_gpus} engine GPUs" if topology.engine_gpus else ""
    if ray_cpus is not None and (not isinstance(ray_cpus, (int, float)) or ray_cpus < needed):
        reject(
            RAY_NUM_CPUS,
            ray_cpus,
            f"at least {BUNDLE_CPUS} x {N_GPUS_PER_NODE}{engine_cpus} + {TASK_RUNNER_CPUS} = {needed} (logical CPUs; "
            f"the CPU profile sets {topology.logical_cpus_per_node})",
            f"verl's placement groups ask for {BUNDLE_CPUS} logical CPUs per trainer rank (and {ENGINE_BUNDLE_CPUS} "
            "per engine replica) and would wait for them forever.",
        )


def engine_gpus_of(config: Any) -> int:
    """The logical GPUs of the engine's own pool in a composed config (0 when colocated, or when its keys are no
    counts: the driver's delayed_sync checks name them)."""
    if _select(config, HYBRID_ENGINE) is not False:
        return 0
    nodes, per_node = _select(config, ENGINE_NNODES), _select(config, ENGINE_GPUS_PER_NODE)
    if not (is_int(nodes) and is_int(per_node)) or nodes < 1 or per_node < 1:
        return 0
    return nodes * per_node
