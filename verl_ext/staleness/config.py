"""The ``trainer.v1.delayed_sync`` config block and the checks that reject a config the mode cannot run.

Read and checked by :func:`delayed_sync_config_from`, which the trainer calls first thing in its
constructor: in verl's single controller (the TaskRunner), before any worker group, rollout server or
reward worker exists. Every error names the config key and the values it accepts. The block's
``sync_interval``, ``sync_offset`` and ``offline`` are a staleness setting, checked by the setting's one rule
(:func:`verl_ext.staleness.setting.check_setting`).
"""

from dataclasses import dataclass, fields
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_ext.config_values import ConfigError, is_finite_number, reject, require_bool, require_int
from verl_ext.staleness.schedule import Phase, PhasedSchedule, StalenessSchedule
from verl_ext.staleness.setting import CONFIG_KEY, TRAINER_MODE, check_setting


@dataclass(frozen=True)
class DelayedSyncConfig:
    """``trainer.v1.delayed_sync``: the staleness knobs (see :mod:`verl_ext.staleness.schedule`), one field per
    key; a value the mode cannot run is refused when the block is made, naming the key."""

    # m: weights reach the rollout engine every sync_interval gradient steps
    sync_interval: int = 1
    # n: each batch is consumed sync_offset steps after the push of the weights that generated it
    sync_offset: int = 0
    # never push weights after the initial ones: every batch comes from the initial policy
    offline: bool = False
    # log staleness/behaviour_minus_current_log_prob at no extra cost: with algorithm.rollout_correction.bypass_mode
    # true it is taken from the actor update's own forward pass over its first mini-batch, before the first
    # optimizer step (verl_ext.staleness.mismatch_in_update); otherwise from verl's own pi_old forward pass
    measure_mismatch: bool = True
    # also measure it over the whole batch with a separate actor forward pass (one per step), logged as
    # staleness/behaviour_minus_current_log_prob_forward_pass: the whole batch when the update has several
    # mini-batches, and a check of the free measurement; needs measure_mismatch=true and bypass_mode=true
    mismatch_forward_pass: bool = False
    # off-policy GRPO's zero-variance masking: leave out of each step's batch every prompt group whose
    # rewards are all equal, without drawing new prompts (the step trains on the other groups)
    zero_variance_masking: bool = False
    # generate each version's batches in the background while the trainer trains on the batches it holds
    # (same schedule); needs a resident rollout engine (actor_rollout_ref.rollout.free_cache_engine=false)
    overlap: bool = False
    # with overlap: the share of each GPU the actor needs (FSDP parameters, gradients, optimizer state,
    # activations) next to the resident engine's actor_rollout_ref.rollout.gpu_memory_utilization
    actor_memory_fraction: float = 0.4
    # several settings in one run, each from a given step on (a measurement of several schedules after one
    # start-up): a list of {start_step, sync_interval, sync_offset, overlap}, checked by read_phases; empty: one
    # setting, the keys above
    phases: tuple = ()

    def __post_init__(self):
        check_setting(self.sync_interval, self.sync_offset, self.offline, prefix=f"{CONFIG_KEY}.")
        for key in ("measure_mismatch", "mismatch_forward_pass", "zero_variance_masking", "overlap"):
            require_bool(f"{CONFIG_KEY}.{key}", getattr(self, key))
        if not _is_fraction(self.actor_memory_fraction):
            reject(f"{CONFIG_KEY}.actor_memory_fraction", self.actor_memory_fraction, FRACTION)
        object.__setattr__(self, "phases", read_phases(self.phases))
        if self.phases:
            for key, default in (("sync_interval", 1), ("sync_offset", 0), ("offline", False), ("overlap", False)):
                if getattr(self, key) != default:
                    reject(f"{CONFIG_KEY}.{key}", getattr(self, key),
                           f"{str(default).lower()} (its default) with {PHASES_KEY} set",
                           "Each phase sets its own sync_interval, sync_offset and overlap.")

    def schedule(self) -> StalenessSchedule | PhasedSchedule:
        """The run's schedule: its one setting, or its phases'."""
        if self.phases:
            return PhasedSchedule(self.phases)
        return StalenessSchedule(
            sync_interval=self.sync_interval, sync_offset=self.sync_offset, offline=self.offline
        )

    @property
    def any_overlap(self) -> bool:
        """Whether some step overlaps generation with training (the run then needs a resident engine)."""
        return self.overlap or any(phase.overlap for phase in self.phases)

    def overlap_at(self, step: int) -> bool:
        """Whether the batches of training step ``step`` are generated in the background."""
        return self.schedule().overlap_at(step) if self.phases else self.overlap


KEYS = tuple(field.name for field in fields(DelayedSyncConfig))
PHASES_KEY = f"{CONFIG_KEY}.phases"
PHASE_KEYS = ("start_step", "sync_interval", "sync_offset", "overlap")


def read_phases(value: Any) -> tuple[Phase, ...]:
    """``trainer.v1.delayed_sync.phases`` -> its phases (empty: no phases); a ConfigError naming the phase and key.

    Each phase is a mapping of ``start_step`` (the first training step it runs, 0-based), ``sync_interval``,
    ``sync_offset`` and ``overlap`` (default false). The first starts at step 0, each later one after the one before,
    on a sync-interval boundary of it (its start minus the previous start a multiple of the previous
    sync_interval) and after the previous phase's start-up (at least m * (floor(n / m) + 1) steps), so that no
    batch crosses a boundary (:class:`verl_ext.staleness.schedule.PhasedSchedule`). Two phases at least.
    """
    if isinstance(value, tuple) and all(isinstance(phase, Phase) for phase in value):
        return value  # already read
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=True)
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        return ()
    allowed = ("a list of two or more mappings {start_step, sync_interval, sync_offset, overlap}, "
               "the first with start_step=0")
    if not isinstance(value, (list, tuple)) or len(value) < 2:
        reject(PHASES_KEY, value, allowed)
    phases: list[Phase] = []
    for index, item in enumerate(value):
        where = f"{PHASES_KEY}[{index}]"
        if not isinstance(item, dict):
            reject(where, item, "a mapping with keys " + ", ".join(PHASE_KEYS))
        unknown = sorted(set(item) - set(PHASE_KEYS))
        if unknown:
            raise ConfigError(f"{where} has unknown key(s) {', '.join(map(str, unknown))}: allowed keys are "
                              f"{', '.join(PHASE_KEYS)}.")
        for key in ("start_step", "sync_interval"):
            if key not in item:
                raise ConfigError(f"{where} has no {key}: each phase needs start_step and sync_interval "
                                  "(sync_offset and overlap default to 0 and false).")
        start = require_int(f"{where}.start_step", item["start_step"], 0)
        check_setting(item["sync_interval"], item.get("sync_offset", 0), False, prefix=f"{where}.")
        overlap = require_bool(f"{where}.overlap", item.get("overlap", False))
        schedule = StalenessSchedule(item["sync_interval"], item.get("sync_offset", 0))
        if index == 0 and start != 0:
            reject(f"{where}.start_step", start, "0 (the first phase starts the run)")
        if index > 0:
            before = phases[-1]
            length, m = start - before.start, before.schedule.sync_interval
            least = before.schedule.startup_steps()
            if length < least or length % m:
                reject(f"{where}.start_step", start,
                       f"{before.start} + a multiple of {m} (phase {index - 1}'s sync_interval) that is at least "
                       f"{least} (its start-up), e.g. {before.start + least}, {before.start + least + m}",
                       "A phase starts on a sync-interval boundary of the phase before it, after that phase's "
                       "start-up, so that no batch is generated for one phase and trained in another.")
        if overlap and schedule.sync_offset == 0:
            reject(f"{where}.sync_offset", 0, f"an integer >= 1 with {where}.overlap=true",
                   "With sync_offset=0 every step after a push waits for the whole generation: nothing to hide.")
        phases.append(Phase(start=start, schedule=schedule, overlap=overlap))
    return tuple(phases)
FRACTION = "a number > 0 and < 1"

# With overlap, engine and actor share every GPU for the whole run; this much stays free for the CUDA
# context, NCCL buffers and allocator fragmentation.
OVERLAP_MEMORY_HEADROOM = 0.05


def _is_fraction(value: Any) -> bool:
    """A finite number strictly between 0 and 1."""
    return is_finite_number(value) and 0 < value < 1


def _reject(key: str, value: Any, allowed: str, why: str = "") -> None:
    reject(key, value, allowed, why)  # a ConfigError (a ValueError), one message shape for every verl-ext key


def read_delayed_sync_block(block: Any) -> DelayedSyncConfig:
    """Check the ``trainer.v1.delayed_sync`` block alone (missing keys take their defaults)."""
    if block is None:
        return DelayedSyncConfig()
    if isinstance(block, DictConfig):
        block = OmegaConf.to_container(block, resolve=True)
    if not isinstance(block, dict):
        _reject(CONFIG_KEY, block, "a mapping with keys " + ", ".join(KEYS))
    unknown = sorted(set(block) - set(KEYS))
    if unknown:
        raise ConfigError(
            f"{CONFIG_KEY} has unknown key(s) {', '.join(unknown)}: allowed keys are {', '.join(KEYS)}."
        )
    return DelayedSyncConfig(**block)


def delayed_sync_config_from(config: DictConfig) -> DelayedSyncConfig:
    """Validate a full verl config for ``trainer.v1.trainer_mode=delayed_sync`` and return its block.

    Besides the block's own values, rejects the verl features this mode cannot honour: no behaviour log-probs
    from the rollout, the replay-buffer features that generate extra prompts in the middle of a step (the
    rollout engine is asleep then, without weights, or busy with scheduled batches), an engine pool that cannot
    hold its replicas or a checkpoint engine that does not exist (``hybrid_engine=false``), and the split's keys
    when they would be ignored (``hybrid_engine=true``).
    """
    mode = OmegaConf.select(config, "trainer.v1.trainer_mode")
    if mode != TRAINER_MODE:
        _reject("trainer.v1.trainer_mode", mode, f"'{TRAINER_MODE}' for this trainer")
    block = read_delayed_sync_block(OmegaConf.select(config, CONFIG_KEY))

    requirements = [
        (
            "actor_rollout_ref.rollout.calculate_log_probs",
            True,
            "true",
            "The behaviour policy's log-probs are pi_old for the loss and the staleness mismatch metric.",
        ),
        (
            "algorithm.filter_groups.enable",
            False,
            "false with delayed_sync",
            (
                "Group filtering refills prompts mid-step, when the rollout engine holds no weights; "
                f"{CONFIG_KEY}.zero_variance_masking=true removes zero-variance groups without refilling."
            ),
        ),
        (
            "trainer.v1.sampler.sync_refill_failed_groups",
            False,
            "false with delayed_sync",
            "Refilling failed groups generates mid-step, when the rollout engine holds no weights.",
        ),
        (
            "skip.rollout_tq.enable",
            False,
            "false with delayed_sync",
            "Rollout skipping replays batches per step and bypasses the schedule.",
        ),
    ]
    for key, required, allowed, why in requirements:
        value = OmegaConf.select(config, key, default=required)
        if value != required:
            _reject(key, value, allowed, why)
    for key in ("trainer.v1.sampler.custom_sampler.path", "trainer.v1.sampler.custom_sampler.name"):
        value = OmegaConf.select(config, key, default=None)
        if value:
            _reject(key, value, "null with delayed_sync", "The mode selects each step's batch itself.")
    if block.mismatch_forward_pass:
        _check_mismatch_forward_pass(config, block)
    split = engine_on_own_pool(config)
    if split:
        _check_engine_pool(config)
    else:
        _check_colocated_engine(config)
    if block.zero_variance_masking:
        _check_zero_variance_masking(config)
    if block.any_overlap:
        _check_overlap(config, block, split)
    if block.phases:
        _check_phases(config, block)
    return block


def _check_phases(config: DictConfig, block: DelayedSyncConfig) -> None:
    """A phased run is a measurement of several schedules after one start: every phase runs (the last starts before
    ``trainer.total_training_steps``), and it neither saves checkpoints nor resumes (a checkpoint's state holds one
    setting)."""
    last = block.phases[-1].start
    steps = OmegaConf.select(config, "trainer.total_training_steps", default=None)
    if steps is not None and steps <= last:
        _reject("trainer.total_training_steps", steps, f"an integer > {last} with {PHASES_KEY} (the last phase "
                f"starts at step {last}, 0-based)", "A phase that never runs would be silently dropped.")
    save_freq = OmegaConf.select(config, "trainer.save_freq", default=-1)
    if save_freq not in (-1, 0, None):
        _reject("trainer.save_freq", save_freq, f"-1 with {PHASES_KEY}",
                "A phased run measures schedules; a checkpoint's state records one setting, so it saves none.")
    from verl_ext.checks.resume import resumed_folder

    folder = resumed_folder(config)
    if folder is not None:
        _reject("trainer.resume_mode", OmegaConf.select(config, "trainer.resume_mode"), f"disable with {PHASES_KEY}",
                f"A phased run starts afresh; it would resume {folder}.")


BYPASS_MODE = "algorithm.rollout_correction.bypass_mode"


def _check_mismatch_forward_pass(config: DictConfig, block: DelayedSyncConfig) -> None:
    """``mismatch_forward_pass=true`` adds a forward pass only where the metric would not have one: refused
    (rather than ignored) where it would change nothing."""
    key = f"{CONFIG_KEY}.mismatch_forward_pass"
    if not block.measure_mismatch:
        _reject(key, True, f"false with {CONFIG_KEY}.measure_mismatch=false",
                "The forward pass measures the mismatch metric, which measure_mismatch=false turns off.")
    if OmegaConf.select(config, BYPASS_MODE, default=False) is not True:
        _reject(key, True, f"false with {BYPASS_MODE}=false",
                "Without bypass mode verl already computes pi_old with the current actor over the whole batch, and "
                "staleness/behaviour_minus_current_log_prob is measured on it: a second pass would measure the same.")


HYBRID_ENGINE = "actor_rollout_ref.hybrid_engine"
ENGINE_NODES = "actor_rollout_ref.rollout.nnodes"
ENGINE_GPUS_PER_NODE = "actor_rollout_ref.rollout.n_gpus_per_node"
ENGINE_PARALLEL_SIZES = (
    "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "actor_rollout_ref.rollout.data_parallel_size",
    "actor_rollout_ref.rollout.pipeline_model_parallel_size",
)


def engine_on_own_pool(config: DictConfig) -> bool:
    """``actor_rollout_ref.hybrid_engine=false``: the rollout engine runs on its own resource pool (the split)."""
    value = OmegaConf.select(config, HYBRID_ENGINE, default=True)
    if not isinstance(value, bool):
        _reject(HYBRID_ENGINE, value, "true (engine colocated with the actor) or false (engine on its own GPUs)")
    return not value


def engine_pool_overrides(nnodes: int, gpus_per_node: int, backend: str) -> list[str]:
    """The overrides that put the rollout engine on its own pool of ``nnodes`` x ``gpus_per_node`` GPUs, resident,
    with weights through checkpoint-engine ``backend`` (the run scripts, the benchmarks and the tests build the
    split with them)."""
    from verl_ext.checkpoint_backends import BACKEND_KEY

    return [
        f"{HYBRID_ENGINE}=false",
        f"{ENGINE_NODES}={nnodes}",
        f"{ENGINE_GPUS_PER_NODE}={gpus_per_node}",
        "actor_rollout_ref.rollout.free_cache_engine=false",
        f"{BACKEND_KEY}={backend}",
    ]


def engine_gpus(config: DictConfig) -> int:
    """GPUs of the engine's pool (``rollout.nnodes`` x ``rollout.n_gpus_per_node``), after :func:`_check_engine_pool`."""
    return int(OmegaConf.select(config, ENGINE_NODES)) * int(OmegaConf.select(config, ENGINE_GPUS_PER_NODE))


def _check_engine_pool(config: DictConfig) -> None:
    """The split (``hybrid_engine=false``): the engine's pool exists and holds whole replicas, the engine keeps
    its weights, the weights travel through a checkpoint engine that exists, and nothing needs the engine on the
    actor's GPUs."""
    why = f"with {HYBRID_ENGINE}=false (the rollout engine on its own GPUs)"
    for key in (ENGINE_NODES, ENGINE_GPUS_PER_NODE):
        require_int(key, OmegaConf.select(config, key, default=None), 1,
                    f"The engine's pool must have GPUs {why} (verl's separate_async sizes it by the same keys).")
    nodes, per_node = (int(OmegaConf.select(config, key)) for key in (ENGINE_NODES, ENGINE_GPUS_PER_NODE))
    sizes = {key: OmegaConf.select(config, key, default=1) for key in ENGINE_PARALLEL_SIZES}
    for key, value in sizes.items():
        require_int(key, value, 1)
    replica = 1
    for value in sizes.values():
        replica *= int(value)
    total = nodes * per_node
    layout = ", ".join(f"{key.rsplit('.', 1)[-1]}={value}" for key, value in sizes.items())
    fits = total % replica == 0 and (per_node % replica == 0 if replica <= per_node else replica % per_node == 0)
    if not fits:
        raise ConfigError(
            f"{ENGINE_NODES}={nodes} x {ENGINE_GPUS_PER_NODE}={per_node} = {total} engine GPUs cannot hold whole "
            f"rollout replicas of {replica} GPUs ({layout}) {why}: the engine GPUs must be a multiple of {replica}, "
            f"and a replica must fill whole nodes or share a node evenly ({ENGINE_GPUS_PER_NODE} a multiple of "
            f"{replica}, or {replica} a multiple of {ENGINE_GPUS_PER_NODE}); otherwise GPUs would sit idle or a "
            "replica could not be placed."
        )
    _require_resident_engine(
        config, why,
        "An engine on its own GPUs never lends them to the actor: it keeps its weights and KV cache, and new "
        "weights reach it only through the checkpoint engine at the sync points.",
    )
    _reject_colocated_reward_model(
        config,
        why,
        "A colocated reward model is put to sleep and woken with the rollout engine on the training GPUs; with the "
        "engine on its own pool there is none there. Give it its own pool or use a rule-based reward.",
    )
    _check_checkpoint_engine(config, why)


def _check_checkpoint_engine(config: DictConfig, why: str) -> None:
    from verl_ext import checkpoint_backends

    backend = OmegaConf.select(config, checkpoint_backends.BACKEND_KEY, default=checkpoint_backends.COLOCATED_BACKEND)
    checkpoint_backends.import_custom_backend_module(
        OmegaConf.select(config, checkpoint_backends.CUSTOM_MODULE_KEY, default=None))
    status = checkpoint_backends.backend_status(str(backend))
    remote = [name for name in status.registered if name != checkpoint_backends.COLOCATED_BACKEND]
    allowed = f"a registered backend other than {checkpoint_backends.COLOCATED_BACKEND!r} {why}: {', '.join(remote)}"
    if backend == checkpoint_backends.COLOCATED_BACKEND:
        _reject(checkpoint_backends.BACKEND_KEY, backend, allowed,
                "The naive backend hands the weights to a rollout inside the actor's own processes; an engine on "
                "its own GPUs needs a transport (verl's nccl on GPUs, verl-ext's gloo on the CPU backend).")
    if status.status == checkpoint_backends.NOT_IMPORTABLE_HERE:
        note = (f"{checkpoint_backends.BACKEND_KEY}={backend}: verl's engine does not import on this machine "
                f"({status.import_error}); the machines of the run need its dependencies")
        if not checkpoint_backends.unimportable_backend_tolerated(note):
            raise ConfigError(note + ".")
    elif status.status == checkpoint_backends.UNKNOWN:
        _reject(checkpoint_backends.BACKEND_KEY, backend, allowed,
                f"No checkpoint engine of that name is registered (nor does one of verl's own modules define it); "
                f"a backend of your own is registered by importing {checkpoint_backends.CUSTOM_MODULE_KEY}.")


def _check_colocated_engine(config: DictConfig) -> None:
    """With the engine colocated (``hybrid_engine=true``) the split's keys would be silently ignored: refuse them."""
    from verl_ext import checkpoint_backends

    why = f"with {HYBRID_ENGINE}=true: the engine shares the actor's GPUs"
    nodes = OmegaConf.select(config, ENGINE_NODES, default=0)
    if nodes not in (0, None):
        _reject(ENGINE_NODES, nodes, f"0 {why}",
                f"An engine pool of its own is {HYBRID_ENGINE}=false; this value would be ignored.")
    backend = OmegaConf.select(config, checkpoint_backends.BACKEND_KEY, default=checkpoint_backends.COLOCATED_BACKEND)
    if backend != checkpoint_backends.COLOCATED_BACKEND:
        _reject(checkpoint_backends.BACKEND_KEY, backend, f"{checkpoint_backends.COLOCATED_BACKEND!r} {why}",
                "verl pushes the weights to a colocated engine in-process whatever this says; another backend is "
                f"used only with {HYBRID_ENGINE}=false.")


def _require_resident_engine(config: DictConfig, why: str, reason: str) -> None:
    """``actor_rollout_ref.rollout.free_cache_engine`` must be false: the engine keeps its weights and KV cache."""
    free_cache_engine = OmegaConf.select(config, "actor_rollout_ref.rollout.free_cache_engine", default=True)
    if free_cache_engine is not False:
        _reject("actor_rollout_ref.rollout.free_cache_engine", free_cache_engine, f"false {why}", reason)


def _check_overlap(config: DictConfig, block: DelayedSyncConfig, split: bool = False) -> None:
    """Overlap generates while the actor trains: the engine must keep its weights, something must be
    generated ahead (n >= 1), the rewards must not need the GPU mid-step, and (colocated) engine and actor must
    both fit on a GPU."""
    why = f"with {CONFIG_KEY}.overlap=true"
    _require_resident_engine(
        config, why,
        "A colocated engine that frees its cache sleeps between generations and discards its weights, so "
        "it cannot generate while the actor trains; overlap needs it resident (weights and KV cache kept).",
    )
    if block.overlap and block.sync_offset == 0 and not block.offline:
        _reject(
            f"{CONFIG_KEY}.sync_offset",
            0,
            f"an integer >= 1 {why} (or {CONFIG_KEY}.offline=true)",
            "With sync_offset=0 the first batch of every interval is generated by the weights pushed right "
            "before it is trained on, and the engine generates an interval's batches together, so every step "
            "that follows a push waits for the whole generation: nothing is hidden behind training.",
        )
    _reject_colocated_reward_model(
        config,
        why,
        "A colocated reward model is woken on the training GPUs in the middle of every step, next to the "
        "resident rollout engine and the actor; give it its own resource pool or use a rule-based reward.",
    )
    if split:
        return  # engine and actor on different GPUs: no memory to share
    engine_fraction = OmegaConf.select(config, "actor_rollout_ref.rollout.gpu_memory_utilization", default=0.5)
    if not _is_fraction(engine_fraction):
        _reject("actor_rollout_ref.rollout.gpu_memory_utilization", engine_fraction, f"{FRACTION} {why}")
    if engine_fraction + block.actor_memory_fraction > 1 - OVERLAP_MEMORY_HEADROOM:
        raise ConfigError(
            f"actor_rollout_ref.rollout.gpu_memory_utilization={engine_fraction} and "
            f"{CONFIG_KEY}.actor_memory_fraction={block.actor_memory_fraction} cannot both hold on a GPU {why}: "
            f"their sum must be <= {1 - OVERLAP_MEMORY_HEADROOM:g} (the resident engine keeps its share for the "
            f"whole run, the actor trains next to it, and {OVERLAP_MEMORY_HEADROOM:g} stays for the CUDA context "
            "and NCCL). Lower gpu_memory_utilization (a smaller KV cache), or offload the actor's parameters or "
            "optimizer (actor_rollout_ref.actor.fsdp_config.param_offload / optimizer_offload) and lower "
            "actor_memory_fraction to what it then needs."
        )


def _reject_colocated_reward_model(config: DictConfig, why: str, reason: str) -> None:
    """A reward model on the training GPUs (enabled, no resource pool of its own) is rejected ``why``."""
    reward_model_enabled = bool(OmegaConf.select(config, "reward.reward_model.enable", default=False))
    separate_pool = bool(OmegaConf.select(config, "reward.reward_model.enable_resource_pool", default=False))
    if reward_model_enabled and not separate_pool:
        _reject("reward.reward_model.enable_resource_pool", False, f"true {why} when reward.reward_model.enable=true", reason)


def _check_zero_variance_masking(config: DictConfig) -> None:
    """Masking reads each group's rewards when the batch is sampled, and needs groups of two or more."""
    why = f"with {CONFIG_KEY}.zero_variance_masking=true"
    _reject_colocated_reward_model(
        config,
        why,
        "A colocated reward model scores the batch only after it is sampled; masking needs the rewards at "
        "sampling time (rule-based rewards, or a reward model in its own resource pool).",
    )
    require_int("actor_rollout_ref.rollout.n", OmegaConf.select(config, "actor_rollout_ref.rollout.n", default=1), 2,
                "A group of one response has no reward variance to measure.", when=why)


def check_staleness_keys(config: DictConfig) -> None:
    """The ``trainer.v1.delayed_sync`` checks for any trainer mode, run in the driver before Ray starts
    (:mod:`verl_ext.driver_checks`): the block's values always (a typo or a NaN is an error in every mode), the
    whole mode's requirements with ``trainer_mode=delayed_sync``, and outside it every key of the block set to
    another value than its default is refused, naming the key: the run would silently ignore it (the
    ``sync_interval=20`` of a run that is on-policy). A ``delayed_sync`` run that resumes also gets its
    checkpoint's state checked here, as the trainer would read it inside Ray
    (:func:`verl_ext.staleness.checkpoint_state.check_resumed_state`)."""
    use_v1 = OmegaConf.select(config, "trainer.use_v1", default=True)
    mode = OmegaConf.select(config, "trainer.v1.trainer_mode", default=None)
    if use_v1 and mode == TRAINER_MODE:
        steps = OmegaConf.select(config, "trainer.total_training_steps", default=None)
        if steps is not None:  # the schedule counts steps with it (1e9 in Hydra is a float)
            require_int("trainer.total_training_steps", steps, 1, "The delayed_sync schedule counts steps with it.")
        delayed_sync_config_from(config)
        from verl_ext.staleness.checkpoint_state import check_resumed_state

        check_resumed_state(config)
        return
    block = read_delayed_sync_block(OmegaConf.select(config, CONFIG_KEY, default=None))
    defaults = DelayedSyncConfig()
    where = f"trainer.v1.trainer_mode={mode}" if use_v1 else f"trainer.use_v1={use_v1}"
    switch = f"trainer.v1.trainer_mode={TRAINER_MODE}" + ("" if use_v1 else " and trainer.use_v1=true")
    for field in fields(DelayedSyncConfig):
        value, default = getattr(block, field.name), getattr(defaults, field.name)
        if value != default:
            if field.name == "phases":  # as the user wrote it, not as read
                value, default = OmegaConf.to_container(OmegaConf.select(config, PHASES_KEY), resolve=True), []
            _reject(
                f"{CONFIG_KEY}.{field.name}",
                value,
                f"{str(default).lower() if isinstance(default, bool) else default} outside "
                f"trainer.v1.trainer_mode={TRAINER_MODE} (its default)",
                f"With {where} the run ignores the {CONFIG_KEY} keys: set {switch} to use it, "
                "or drop the key."
                + (" verl's own group filter, which draws new prompts to refill: algorithm.filter_groups.enable=true."
                   if field.name == "zero_variance_masking" else ""),
            )
