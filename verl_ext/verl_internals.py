"""Every place where verl-ext reaches past verl's public interface, in one table (data only, no behaviour).

verl 0.9.1 offers registries (losses, estimators, trainer modes, platforms, rollout replicas, checkpoint
engines, agent loops) and the v1 trainer's ``on_*`` hooks; verl-ext uses those where they exist. Where they
do not, it overrides or calls a private method, writes verl's private state, or patches a function. A verl
upgrade that renames such a thing would not fail: an override of a renamed method is simply never called.
So each one is listed here, with what it is, why verl-ext needs it and the parameters it expects, and
``verl-ext doctor`` (:mod:`verl_ext.verl_internals_check`) checks the table against the installed verl: the thing
exists, its parameters are the listed ones, and the verl code that must still read it does. The tests keep
the table complete (tests/test_verl_internals.py: every private method a verl-ext subclass shadows, every CPU
patch, every module a post-import hook waits for).

Kinds:

- ``override``: a verl-ext subclass redefines the method (and verl calls it through ``self``);
- ``call``: verl-ext calls a private method;
- ``patch``: verl-ext replaces a function or method for every caller in the process;
- ``attribute write`` / ``attribute read``: verl-ext sets or reads verl's private state;
- ``environment variable``: verl-ext sets an environment variable that the listed verl code reads (there is no
  config key for it);
- ``import hook``: verl-ext registers or patches something when verl imports this module (a row of
  :func:`verl_ext.plugin.wiring`, the one table of them); the entry names the object that must live in that module.

Not listed: verl's public functions and classes that verl-ext imports and calls (``register_trainer``,
``PlatformRegistry``, ``agg_loss``, ...), the abstract interfaces it implements (``RolloutReplica``,
``BaseRollout``, ``CheckpointEngine``, ``PlatformBase``), and public instance attributes it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

OVERRIDE = "override"
CALL = "call"
PATCH = "patch"
ATTRIBUTE_WRITE = "attribute write"
ATTRIBUTE_READ = "attribute read"
IMPORT_HOOK = "import hook"
ENVIRONMENT_VARIABLE = "environment variable"
KINDS = (OVERRIDE, CALL, PATCH, ATTRIBUTE_WRITE, ATTRIBUTE_READ, IMPORT_HOOK, ENVIRONMENT_VARIABLE)


@dataclass(frozen=True)
class VerlInternal:
    """One private thing of verl (or, for a patch, of torch or Ray) that verl-ext touches.

    ``module`` + ``name`` locate it (``name`` is the qualified name inside the module, ``Class.method``).
    ``parameters``: the parameter names its signature must have, in order (``self`` included), for a callable;
    None for an attribute or a module object. ``instance_attribute``: set on instances, so it cannot be looked
    up on the class; then ``read_in`` is what proves verl still uses it. ``read_in``: verl code
    (``"module:Qualified.name"``, or just a module) whose source must contain ``token`` (default: the last part
    of ``name``) -- the place that gives the override, write or patch its effect.
    """

    module: str
    name: str
    kind: str
    why: str
    used_by: str
    parameters: Optional[tuple[str, ...]] = None
    instance_attribute: bool = False
    read_in: tuple[str, ...] = ()
    token: Optional[str] = None

    @property
    def what(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def verl_file(self) -> str:
        """The file of ``module`` (or of the first ``read_in`` module, for a patch of torch or Ray), relative to
        site-packages; a package is its ``__init__.py`` (the check resolves that)."""
        module = self.module if self.module.split(".")[0] == "verl" else self.read_in[0].split(":")[0]
        return module.replace(".", "/") + ".py"

    @property
    def searched_token(self) -> str:
        return self.token or self.name.rsplit(".", 1)[-1]


TRAINER = "verl.trainer.ppo.v1.trainer_base"
REPLAY_BUFFER = "verl.trainer.ppo.v1.replay_buffer"
DELAYED_SYNC = "verl_ext/staleness/trainer.py DelayedSyncTrainer"
SCHEDULED_BUFFER = "verl_ext/staleness/replay_buffer.py ScheduledReplayBuffer"
CPU_PATCHES = "verl_ext/cpu_runtime/patches.py"
MISMATCH_IN_UPDATE = "verl_ext/staleness/mismatch_in_update.py"
NO_PUBLIC_HOOK = "verl 0.9.1 has no public hook for this"


def _trainer(name: str, kind: str, why: str, parameters: tuple[str, ...], used_by: str = DELAYED_SYNC) -> VerlInternal:
    return VerlInternal(TRAINER, f"PPOTrainer.{name}", kind, why, used_by, parameters)


def _buffer(name: str, kind: str, why: str, parameters: tuple[str, ...], used_by: str = SCHEDULED_BUFFER) -> VerlInternal:
    return VerlInternal(REPLAY_BUFFER, f"ReplayBuffer.{name}", kind, why, used_by, parameters)


VERL_INTERNALS: tuple[VerlInternal, ...] = (
    # ------------------------------------------------------------ the delayed_sync trainer (verl's PPOTrainer)
    _trainer("_setup", OVERRIDE, "with the engine on its own pool, build verl's standalone replicas and a checkpoint "
             f"engine manager after verl's set-up, as verl's separate_async does ({NO_PUBLIC_HOOK})", ("self",)),
    _trainer("_rollout_server_managers", OVERRIDE, "adds the standalone engine's manager, so verl's profiling and "
             "shutdown reach it", ("self",)),
    _trainer("_get_n_gpus_for_throughput", OVERRIDE, "verl's per-GPU throughput counts the engine's own GPUs too",
             ("self",)),
    _trainer("_build_replay_buffer", OVERRIDE, "the ScheduledReplayBuffer: at step l only the batch generated for "
             "step l (verl's custom_sampler config is built without the group-filter and refill arguments)", ("self",)),
    _trainer("_init_dataloader", OVERRIDE, "read whole training batches as in sync mode (verl fetches prompts one at "
             "a time in every other mode, for refills this mode never makes)", ("self",)),
    _trainer("_reissue_inflight_prompts", OVERRIDE, "a no-op: checkpoints are saved between generations and hold no "
             "in-flight prompt group", ("self", "partition_id")),
    _trainer("_step_once", OVERRIDE, "wait for the step's batch (overlap), zero-variance masking, and no update at all "
             "when every group is removed", ("self", "metrics", "timing_raw", "sample_batch_size")),
    _trainer("_compute_advantage", OVERRIDE, "moves the estimators' own metrics (verl_ext.algorithms.step_metrics) into the "
             "step's metrics; verl's estimators return only advantages and returns (the public step() would see them "
             "after verl's MetricsAggregator has combined the iterations' metrics)", ("self", "batch", "metrics")),
    _trainer("_compute_metrics", OVERRIDE, "adds the staleness timing metrics; a step without update logs only its "
             "step, epoch and timings", ("self", "batch", "metrics", "timing_raw", "global_steps", "epoch")),
    _trainer("_log_rollout_data", OVERRIDE, "skipped for a step without update (its batch holds no advantages)",
             ("self", "batch", "timing_raw", "rollout_data_dir")),
    _trainer("_compute_old_log_prob", OVERRIDE, "measures behaviour minus current log-prob right after pi_old when verl "
             "computed pi_old with the current actor (decoupled mode), or with a forward pass of its own "
             "(mismatch_forward_pass), before the update changes the actor", ("self", "batch", "metrics")),
    _trainer("_save_checkpoint", OVERRIDE, "waits for generations in flight and writes delayed_sync_state.json before "
             "verl's tracker file marks the checkpoint complete", ("self",)),
    _trainer("_load_checkpoint", OVERRIDE, "reads and checks delayed_sync_state.json of the checkpoint verl resumes, "
             "before verl loads the weights", ("self",)),
    _trainer("_stop_rollout_profiling", CALL, "on_sample_end does what verl's would (stop the rollout profiler), "
             "without waking the engine", ("self",)),
    _trainer("_next_train_batch", CALL, "the next data.train_batch_size prompts of verl's dataloader, for each batch "
             "generated ahead", ("self", "num_prompts")),
    VerlInternal(TRAINER, "PPOTrainer._enable_hybrid_replicas", ATTRIBUTE_WRITE,
                 "False when the engine is on its own pool: verl then builds no rollout in the actor workers (verl's "
                 "comment in _setup names this switch for subclasses; there is no config key)", DELAYED_SYNC,
                 instance_attribute=True,
                 read_in=(f"{TRAINER}:PPOTrainer._setup", f"{TRAINER}:PPOTrainer._init_resource_pool_mgr")),
    VerlInternal(TRAINER, "PPOTrainer._pending_sync_metrics", ATTRIBUTE_WRITE,
                 "the push's metrics (synced, weight_syncs, weight_pushes) join the next step's metrics through "
                 f"verl's own pending dict ({NO_PUBLIC_HOOK})", DELAYED_SYNC, instance_attribute=True,
                 read_in=(f"{TRAINER}:PPOTrainer._consume_sync_metrics",)),
    VerlInternal(TRAINER, "PPOTrainer.trainer_mode", ATTRIBUTE_WRITE,
                 "set to 'sync' while verl's _init_dataloader runs (the only place the mode name decides how prompts "
                 "are fetched), restored right after", DELAYED_SYNC, instance_attribute=True,
                 read_in=(f"{TRAINER}:PPOTrainer._init_dataloader",)),
    # public hooks of the v1 trainer that DelayedSyncTrainer overrides: listed so that a renamed hook is noticed
    *(
        _trainer(name, OVERRIDE, why, parameters)
        for name, why, parameters in (
            ("__init__", "the delayed_sync config is checked before verl builds anything", ("self", "config")),
            ("get_llm_client", "the standalone engine's client when the engine is on its own pool", ("self",)),
            ("on_init_end", "plans the start-up after a checkpoint is loaded; pushes the weights", ("self",)),
            ("fit", "starts and stops the overlap watcher around verl's loop", ("self", "agent_loop_manager")),
            ("on_train_begin", "generates the start-up batches", ("self",)),
            ("prepare_step", "submits nothing: the step's batch was generated after its version's push", ("self",)),
            ("on_sample_end", "the engine already sleeps", ("self",)),
            ("step", "adds the staleness metrics of the step's batch", ("self", "metrics", "timing_raw")),
            ("on_step_end", "at a sync point: push the weights, generate the next batches", ("self",)),
            ("on_validate_begin", "validation evaluates the current weights (one extra push if needed)", ("self",)),
            ("on_validate_end", "the engine goes back to sleep inside the training loop", ("self",)),
        )
    ),
    # ------------------------------------------------------------ verl's replay buffer
    _buffer("__init__", CALL, "DelayedSyncTrainer._build_replay_buffer passes these by keyword (poll_interval: "
            "verl's 2 s would round every wait up to 2 s)",
            ("self", "trainer_mode", "trainer_config", "max_off_policy_threshold", "max_off_policy_strategy",
             "sampler_kwargs", "poll_interval", "refill_fn", "filter_groups_metric", "train_batch_size",
             "gen_batch_size", "max_inflight_gen_batches", "sync_refill_failed_groups"), used_by=DELAYED_SYNC),
    _buffer("sample", OVERRIDE, "hands out the groups prepare_step kept for this step (verl's sampler takes the "
            "oldest finished groups, mixing batches)", ("self", "global_steps", "partition_id", "batch_size")),
    _buffer("_sync_metadata_from_transfer_queue", OVERRIDE, "also keeps the prompt tags (step, behaviour version) "
            "verl's listing holds", ("self",)),
    _buffer("_materialize_batch", OVERRIDE, "puts the batch in verl_ext.batch_order's canonical order",
            ("self", "partition_id", "selected_prompt_uids", "partition_snapshot")),
    _buffer("_clear_groups", CALL, "removes zero-variance groups from the TransferQueue as verl removes consumed ones",
            ("self", "partition_id", "uids")),
    _buffer("_wait_for_next_poll", CALL, "waits for the step's groups with verl's poll interval and debug logging",
            ("self", "partition_id", "last_debug_time")),
    # ------------------------------------------------------------ the CPU backend's patches (verl_ext/cpu_runtime/patches.py)
    VerlInternal("torch.distributed", "init_process_group", PATCH,
                 "duplicate_gloo_backend: verl builds the backend 'cpu:gloo,{device}:{backend}', which on the CPU "
                 f"platform repeats 'cpu:gloo' and torch refuses; the patch drops exact repeats ({NO_PUBLIC_HOOK})",
                 CPU_PATCHES,
                 ("backend", "init_method", "timeout", "world_size", "rank", "store", "group_name", "pg_options",
                  "device_id", "_ranks"),
                 read_in=("verl.utils.distributed:initialize_global_process_group_ray",), token="cpu:gloo,"),
    VerlInternal("verl.utils.distributed", "initialize_global_process_group_ray", ENVIRONMENT_VARIABLE,
                 "DIST_INIT_METHOD: verl's workers pass it to init_process_group as its init_method; the CPU profile "
                 "sets it to the loopback rendezvous (torch's env:// serves rank 0's store on every interface)",
                 "verl_ext/cpu/profile.py, verl_ext/cpu_runtime/loopback_store.py", ("timeout_second", "backend"),
                 read_in=("verl.utils.distributed:initialize_global_process_group_ray",), token="DIST_INIT_METHOD"),
    VerlInternal("torch.distributed.fsdp", "CPUOffloadPolicy.__init__", PATCH,
                 "unpinned_cpu_offload: verl's FSDP engine builds CPUOffloadPolicy(pin_memory=True) for the reference "
                 "policy, and pinning needs an NVIDIA driver; on a CPU nothing is pinned", CPU_PATCHES,
                 ("self", "pin_memory"),
                 read_in=("verl.workers.engine.fsdp.transformer_impl:FSDPEngine._build_fsdp_module",),
                 token="CPUOffloadPolicy(pin_memory=True)"),
    _buffer("__init__", PATCH, "replay_buffer_poll_interval: verl's trainer builds the buffer without poll_interval "
            "(2 s per poll, no config key); a CPU rollout batch takes ~0.1 s",
            ("self", "trainer_mode", "trainer_config", "max_off_policy_threshold", "max_off_policy_strategy",
             "sampler_kwargs", "poll_interval", "refill_fn", "filter_groups_metric", "train_batch_size",
             "gen_batch_size", "max_inflight_gen_batches", "sync_refill_failed_groups"), used_by=CPU_PATCHES),
    _buffer("_materialize_batch", PATCH, "batch_order: verl's own modes on the CPU backend get the canonical batch "
            "order (verl's custom_sampler is built without the group-filter and refill arguments)",
            ("self", "partition_id", "selected_prompt_uids", "partition_snapshot"), used_by=CPU_PATCHES),
    VerlInternal("verl.experimental.agent_loop.agent_loop", "hydra.utils.instantiate", PATCH,
                 "agent_loop_construction: verl builds every response's agent loop with hydra.utils.instantiate, whose "
                 "merge of the arguments into a config costs ~4 ms a response; the module's hydra calls the class "
                 f"directly for a registry entry that is only a class path ({NO_PUBLIC_HOOK})", CPU_PATCHES,
                 ("config", "args", "kwargs"),
                 read_in=("verl.experimental.agent_loop.agent_loop:AgentLoopWorker._run_agent_loop",),
                 token="hydra.utils.instantiate("),
    # ------------------------------------------------------------ the mismatch metric inside the actor's update
    VerlInternal("verl.workers.engine_workers", "TrainingWorker.train_batch", PATCH,
                 "mismatch_in_update: the first call (mini-batch) of an update the delayed_sync trainer marks runs its "
                 "loss with two more sums, behaviour minus current log-prob and the token count, so that "
                 "staleness/behaviour_minus_current_log_prob needs no forward pass of its own; every other call is "
                 f"verl's ({NO_PUBLIC_HOOK}: the loss function is built inside the worker)", MISMATCH_IN_UPDATE,
                 ("self", "data"), read_in=("verl.workers.engine_workers:TrainingWorker.train_mini_batch",),
                 token="self.train_batch("),
    VerlInternal("verl.workers.engine_workers", "TrainingWorker.loss_fn", ATTRIBUTE_WRITE,
                 "swapped for the measuring loss (which calls the worker's own) during that one call, then restored",
                 MISMATCH_IN_UPDATE, instance_attribute=True,
                 read_in=("verl.workers.engine_workers:TrainingWorker.train_batch",), token="loss_function=self.loss_fn"),
    _trainer("_update_actor", OVERRIDE, "marks the update's batch for the mismatch measurement (bypass mode) and takes "
             "the two sums out of the update's metrics", ("self", "batch", "metrics")),
    # ------------------------------------------------------------ other writes and reads of verl's private state
    VerlInternal("verl.utils.config", "validate_config", PATCH,
                 "verl-ext's whole-run checks run first, in the driver before Ray (verl has no hook for extra "
                 "config checks); main_ppo binds the name after the plugin wrapped it",
                 "verl_ext/driver_checks.py install_driver_checks", ("config", "use_reference_policy", "use_critic"),
                 read_in=("verl.trainer.main_ppo",), token="from verl.utils.config import validate_config"),
    VerlInternal("verl.workers.rollout.base", "_ROLLOUT_REGISTRY", ATTRIBUTE_WRITE,
                 f"rollout 'cpu' -> CPUServerAdapter ({NO_PUBLIC_HOOK}: no function adds to this dict)",
                 "verl_ext/cpu_runtime/registration.py", read_in=("verl.workers.rollout.base:get_rollout_class",)),
    VerlInternal("verl.single_controller.base.worker_group", "WorkerGroup._dispatch_info", ATTRIBUTE_READ,
                 "the actor's data-parallel ranks (what verl's _balance_batch reads in the same step), to split the "
                 "step's batch into optimizer updates as verl's workers do: staleness/update_lag_*", DELAYED_SYNC,
                 instance_attribute=True, read_in=(f"{TRAINER}:PPOTrainer._balance_batch",)),
    VerlInternal("verl.experimental.agent_loop.tool_parser", "ToolParser._registry", ATTRIBUTE_READ,
                 "which tool parsers are registered (multi_turn.format is refused before Ray otherwise): verl's "
                 "get_tool_parser raises on an unknown name, inside the agent-loop workers, and lists nothing",
                 "verl_ext/checks/tools.py",
                 read_in=("verl.experimental.agent_loop.tool_parser:ToolParser.get_tool_parser",)),
    VerlInternal("verl.experimental.agent_loop.agent_loop", "_agent_loop_registry", ATTRIBUTE_READ,
                 "which agent loops are registered (agent.default_agent_loop is refused before Ray otherwise): verl "
                 "asserts it only in the agent-loop workers", "verl_ext/checks/tools.py",
                 read_in=("verl.experimental.agent_loop.agent_loop:AgentLoopWorker._run_agent_loop",)),
    VerlInternal("verl.checkpoint_engine.base", "CheckpointEngineRegistry._registry", ATTRIBUTE_READ,
                 "which backends are registered (the driver's check names them; gloo refuses to replace another "
                 "class): the registry's public get() raises on an unknown name and lists nothing",
                 "verl_ext/checkpoint_backends.py, verl_ext/cpu_runtime/checkpoint_engine.py",
                 read_in=("verl.checkpoint_engine.base:CheckpointEngineRegistry.get",)),
    VerlInternal("verl.checkpoint_engine.base", "CheckpointEngineRegistry._import_errors", ATTRIBUTE_READ,
                 "why one of verl's own backends does not import here (a GPU config checked on a CPU machine)",
                 "verl_ext/checkpoint_backends.py",
                 read_in=("verl.checkpoint_engine.base:CheckpointEngineRegistry.record_import_error",)),
    VerlInternal("verl.plugin.platform.platform_manager", "_current_platform", ATTRIBUTE_WRITE,
                 "a process that checks or runs a CPU run in itself (the launcher's check, a CPU Ray session) holds "
                 "the CPU platform and restores the previous one after; verl's set_platform cannot restore 'not "
                 "resolved yet' (None)",
                 "verl_ext/cpu_runtime/platform.py hold_cpu_platform", read_in=("verl.plugin.platform.platform_manager:get_platform",)),
    VerlInternal("verl.workers.rollout.replica", "RolloutReplica._server_handle", ATTRIBUTE_WRITE,
                 "launch_servers stores the CPU server's handle where verl's server_handle property reads it",
                 "verl_ext/cpu_runtime/rollout_replica.py CPURolloutReplica.launch_servers", instance_attribute=True,
                 read_in=("verl.workers.rollout.replica:RolloutReplica.server_handle",)),
    VerlInternal("verl.workers.rollout.replica", "RolloutReplica._server_address", ATTRIBUTE_WRITE,
                 "launch_servers stores the CPU server's address where verl's server_address property reads it",
                 "verl_ext/cpu_runtime/rollout_replica.py CPURolloutReplica.launch_servers", instance_attribute=True,
                 read_in=("verl.workers.rollout.replica:RolloutReplica.server_address",)),
    VerlInternal("verl.experimental.agent_loop.single_turn_agent_loop", "SingleTurnAgentLoop.server_manager",
                 ATTRIBUTE_WRITE, "the seeded agent loop wraps verl's client so each generate call carries its seed "
                 "(verl passes no per-request seed)", "verl_ext/seeded_agent_loop.py", instance_attribute=True,
                 read_in=("verl.experimental.agent_loop.single_turn_agent_loop:SingleTurnAgentLoop.run",),
                 token="self.server_manager.generate"),
    VerlInternal("verl.experimental.agent_loop.single_turn_agent_loop", "SingleTurnAgentLoop.run", OVERRIDE,
                 "adds the per-request seed around verl's single-turn run", "verl_ext/seeded_agent_loop.py",
                 ("self", "sampling_params", "priority", "kwargs")),
    # ------------------------------------------------------------ Ray's, for a Ray on loopback (verl_ext/cpu/ray_loopback.py)
    VerlInternal("ray._private.services", "get_node_ip_address", PATCH,
                 "a local cluster's node (`ray start`, in its own process) takes 127.0.0.1 as its node IP, so every "
                 "socket it opens listens on loopback: Ray turns an explicit 127.0.0.1 into the machine's network "
                 "address and refuses a worker node under its one-machine switch (no option keeps it local)",
                 "verl_ext/cpu/ray_loopback.py main", ("address",),
                 read_in=("ray.scripts.scripts:start", "ray._private.services:resolve_ip_for_localhost")),
    VerlInternal("ray._private.ray_constants", "ENABLE_RAY_CLUSTER", ATTRIBUTE_WRITE,
                 "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 for a process that imported Ray before it was set (a driver "
                 "joining the local cluster in this process): Ray reads the variable only on import",
                 "verl_ext/cpu/ray_loopback.py loopback_in_this_process",
                 read_in=("ray._private.services:get_node_ip_address",)),
    # ------------------------------------------------------------ modules whose import triggers a registration
    VerlInternal("verl.trainer.ppo.core_algos", "POLICY_LOSS_REGISTRY", IMPORT_HOOK,
                 "losses and estimators are registered when verl imports core_algos", "verl_ext/plugin.py"),
    VerlInternal("verl.trainer.ppo.core_algos", "ADV_ESTIMATOR_REGISTRY", IMPORT_HOOK,
                 "estimators are registered when verl imports core_algos", "verl_ext/plugin.py"),
    VerlInternal("verl.workers.rollout.base", "get_rollout_class", IMPORT_HOOK,
                 "the cpu rollout adapter is added when verl imports this module", "verl_ext/cpu_runtime/registration.py"),
    VerlInternal("verl.workers.rollout.replica", "RolloutReplicaRegistry", IMPORT_HOOK,
                 "the cpu rollout replica is registered when verl imports this module", "verl_ext/cpu_runtime/registration.py"),
    VerlInternal("verl.checkpoint_engine.base", "CheckpointEngineRegistry", IMPORT_HOOK,
                 "the gloo checkpoint engine is registered when verl imports this module", "verl_ext/cpu_runtime/registration.py"),
    VerlInternal("verl.workers.engine_workers", "TrainingWorker", IMPORT_HOOK,
                 "the mismatch_in_update patch is installed when verl imports its engine workers (in the actor's "
                 "process)", "verl_ext/staleness/__init__.py"),
    VerlInternal(TRAINER, "register_trainer", IMPORT_HOOK,
                 "trainer mode delayed_sync is registered when verl imports its v1 trainer", "verl_ext/staleness/__init__.py"),
    VerlInternal("verl.experimental.agent_loop.single_turn_agent_loop", "SingleTurnAgentLoop", IMPORT_HOOK,
                 "the seeded agent loop is registered when verl imports its single-turn agent loop", "verl_ext/plugin.py"),
    VerlInternal(REPLAY_BUFFER, "ReplayBuffer", IMPORT_HOOK,
                 "the CPU patches of the replay buffer are installed when verl imports it", CPU_PATCHES),
    VerlInternal("verl.experimental.agent_loop.tool_parser", "ToolParser", IMPORT_HOOK,
                 "the tiny counting task's tool parser is registered when verl imports its tool parsers",
                 "verl_ext/plugin.py"),
    VerlInternal("verl.experimental.agent_loop.agent_loop", "AgentLoopWorker", IMPORT_HOOK,
                 "the CPU patch of the agent loops' construction is installed when verl imports this module",
                 CPU_PATCHES),
)
