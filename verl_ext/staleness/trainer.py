"""``trainer.v1.trainer_mode=delayed_sync``: verl's v1 PPO trainer with controlled, measured staleness.

Design (the reasons are in docs/staleness.md). Colocated vLLM sleeps at level 2 between generations and
discards its weights, so the rollout engine can only generate right after a weight push. The trainer
therefore generates, right after each push of version p, every batch that version p generates under the
schedule (:mod:`verl_ext.staleness.schedule`), waits for them, puts the engine back to sleep and trains
from that FIFO of pending batches, which lives in verl's TransferQueue: the engine wakes once per
interval, and the number of pushes after training steps is exactly the schedule's number of sync points.

Call order inside verl's ``PPOTrainer.fit`` (one training step l = global_steps - 1):

- ``on_init_end`` (after a checkpoint is loaded): plan the start-up; push the current weights if the
  start-up must generate.
- ``on_train_begin``: generate the start-up batches: the first interval(s) at a fresh start; after a
  resume only what the checkpoint lacks (see :meth:`DelayedSyncTrainer._plan_start_up`).
- ``step``: the replay buffer hands out the batch tagged for step l, less its zero-variance groups with
  ``zero_variance_masking`` (no update at all when every group is removed); pi_old is the behaviour
  log-prob (``algorithm.rollout_correction.bypass_mode``); the staleness metrics are measured on the batch,
  the log-prob mismatch inside the actor update's own forward pass (:mod:`verl_ext.staleness.mismatch_in_update`).
- checkpoint save (verl saves the TransferQueue, hence the pending batches, for every mode but ``sync``);
  the trainer's own counts go to ``delayed_sync_state.json`` first (:mod:`verl_ext.staleness.checkpoint_state`),
  and a resume checks them before verl loads anything.
- ``on_step_end``: at a sync point push version l + 1 and generate its batches.
- ``on_validate_begin``/``on_validate_end``: validation evaluates the current weights (one extra push when
  the engine does not hold them; it never changes which weights generate training batches).

With ``overlap`` (a resident engine, ``free_cache_engine=false``) the batches of version p are submitted
right after its push and generated in the background; a step waits only for its own batch, and every
push and checkpoint first waits for the batches still in flight (:mod:`verl_ext.staleness.generation_tracker`),
so each batch is generated entirely by the version the schedule names.

**Engine on its own pool** (``actor_rollout_ref.hybrid_engine=false``, the explorer/trainer split): the actor
workers hold no rollout; verl's standalone replicas run on a pool of ``rollout.nnodes`` x
``rollout.n_gpus_per_node`` GPUs, and each push goes through the configured checkpoint engine
(``rollout.checkpoint_engine.backend``: verl's ``nccl`` on GPUs, verl-ext's ``gloo`` on the CPU backend), as
verl's ``separate_async`` builds them. The engine is resident (it never sleeps); the schedule, the pushes and
the waits are the same code. Without ``overlap`` the trainer waits for each interval's generation right after
the push (each side idles while the other works); with ``overlap`` generation runs while the trainer trains.

verl's v1 trainer has public hooks (``on_*``, ``prepare_step``, ``step``) but not for everything this mode changes:
the private ``PPOTrainer`` methods overridden or called here, and the private state written, are listed with the
reason for each in :mod:`verl_ext.verl_internals`, which ``verl-ext doctor`` checks against the installed verl.
"""

import logging
import os

import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.trainer_base import PPOTrainer, register_trainer
from verl.utils import tensordict_utils as tu
from verl.utils.debug import marked_timer

from verl_ext import metric_names
from verl_ext.algorithms import step_metrics
from verl_ext.checks.resume import resumed_folder
from verl_ext.staleness.checkpoint_state import STATE_FILE, DelayedSyncState, read_state, write_state
from verl_ext.staleness.config import TRAINER_MODE, delayed_sync_config_from, engine_gpus, engine_on_own_pool
from verl_ext.staleness.generation_tracker import GenerationTracker, GenerationWatcher
from verl_ext.staleness.measurements import StepMeasurements
from verl_ext.staleness.mismatch_in_update import UPDATE_KEY
from verl_ext.staleness.pending_batches import (
    BEHAVIOUR_VERSION_TAG,
    STEP_TAG,
    TERMINAL_STATUSES,
    read_pending_batches,
)
from verl_ext.staleness.replay_buffer import TRAIN_PARTITION, PreparedStep, ScheduledReplayBuffer

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

# how often a waiting trainer looks whether the generation it waits for is over (a TransferQueue listing)
GENERATION_POLL_SECONDS = 0.05
# how often the watcher thread records the end of a generation nobody waits for (overlap)
WATCHER_POLL_SECONDS = 0.1


@register_trainer(TRAINER_MODE)
class DelayedSyncTrainer(PPOTrainer):
    """PPO trainer whose rollout weights are pushed only at the schedule's sync points (the engine colocated with
    the actor, or on its own pool)."""

    def __init__(self, config):
        # Reject a bad config before anything starts (verl's workers are created later, in init()).
        self.delayed_sync = delayed_sync_config_from(config)
        self.schedule = self.delayed_sync.schedule()
        # read by verl's _init_resource_pool_mgr and _setup: with the engine on its own pool the actor workers
        # hold no rollout, and no replica is built on the training GPUs
        self._enable_hybrid_replicas = not engine_on_own_pool(config)
        super().__init__(config)
        # pushes at the schedule's sync points so far, the one redone after a resume included
        self.weight_syncs = 0
        # every update_weights call: the start-up one, the sync points and those for validation
        self.weight_pushes = 0
        # the global step from which this run's chain of checkpoints has followed this schedule (a resume under
        # another schedule moves it): what a resume checks the counts against (checkpoint_state.check_counts)
        self.schedule_since = 0
        # the version the rollout engine holds; None while it sleeps (sleep discards the weights)
        self._rollout_version: int | None = None
        self._in_training_loop = False
        self._start_up_steps: list[int] = []
        # the prompt groups of the step being trained (after zero-variance masking)
        self._prepared_step: PreparedStep | None = None
        # a resident engine keeps its weights between generations (free_cache_engine=false; overlap needs it)
        self._engine_resident = config.actor_rollout_ref.rollout.get("free_cache_engine", True) is False
        # the batches being generated, the waits for them and the timeline of both
        self.generations = GenerationTracker(self._finished_groups, poll_seconds=GENERATION_POLL_SECONDS)
        self._watcher: GenerationWatcher | None = None
        # what each step measures: staleness, lag in updates, log-prob mismatch, generation timing
        self.measurements = StepMeasurements(config, self.delayed_sync, self.schedule, self.generations)

    # ------------------------------------------------------------------ the engine on its own pool

    @property
    def engine_on_own_pool(self) -> bool:
        return not self._enable_hybrid_replicas

    def _setup(self):
        super()._setup()
        if self.engine_on_own_pool:
            # as verl's separate_async: standalone replicas on their own resource pools, and a checkpoint engine
            # of the configured backend between the actor workers and them
            from verl.checkpoint_engine import CheckpointEngineManager
            from verl.utils.config import omega_conf_to_dataclass
            from verl.workers.rollout.llm_server import LLMServerManager

            self.standalone_server_manager = LLMServerManager.create(config=self.config)
            self.standalone_checkpoint_manager = CheckpointEngineManager(
                config=omega_conf_to_dataclass(self.config.actor_rollout_ref.rollout.checkpoint_engine),
                actor_wg=self.actor_rollout_wg,
                replicas=self.standalone_server_manager.get_replicas(),
            )
            logger.info(
                f"delayed_sync: rollout engine on its own pool ({engine_gpus(self.config)} GPUs, "
                f"{len(self.standalone_server_manager.get_replicas())} replicas), weights through checkpoint engine "
                f"{self.config.actor_rollout_ref.rollout.checkpoint_engine.backend!r}"
            )

    def _weight_manager(self):
        """The checkpoint-engine manager that pushes weights to the engine that generates training batches."""
        return self.standalone_checkpoint_manager if self.engine_on_own_pool else self.checkpoint_manager

    def get_llm_client(self):
        if self.engine_on_own_pool:
            return self.standalone_server_manager.get_client()
        return super().get_llm_client()

    def _rollout_server_managers(self) -> list:
        managers = super()._rollout_server_managers()
        if self.engine_on_own_pool:
            managers.append(self.standalone_server_manager)
        return managers

    def _get_n_gpus_for_throughput(self) -> int:
        # verl's throughput metrics per GPU count the engine's GPUs too when it has its own
        return super()._get_n_gpus_for_throughput() + (engine_gpus(self.config) if self.engine_on_own_pool else 0)

    # ------------------------------------------------------------------ verl hooks

    def _build_replay_buffer(self) -> ScheduledReplayBuffer:
        sampler = self.config.trainer.v1.sampler
        return ScheduledReplayBuffer(
            trainer_mode=self.trainer_mode,
            trainer_config=self.config.trainer.v1.get(self.trainer_mode, {}),
            max_off_policy_threshold=sampler.max_off_policy_threshold,
            max_off_policy_strategy=sampler.max_off_policy_strategy,
            sampler_kwargs=sampler.sampler_kwargs,
            refill_fn=None,  # never refills: the config check rejects group filtering and failed-group refill
            poll_interval=GENERATION_POLL_SECONDS,  # verl's 2 s would round every wait for a batch up to 2 s
            train_batch_size=self.config.data.train_batch_size,
            gen_batch_size=self.config.data.get("gen_batch_size", None) or self.config.data.train_batch_size,
            zero_variance_masking=self.delayed_sync.zero_variance_masking,
        )

    def _init_dataloader(self):
        # verl fetches prompts one at a time in every mode but `sync`, for the refills of its async modes.
        # This mode never refills: read whole training batches like `sync` (same prompt order, same epoch
        # ends). The mode name only decides that in _init_dataloader.
        self.trainer_mode = "sync"
        try:
            super()._init_dataloader()
        finally:
            self.trainer_mode = TRAINER_MODE

    def on_init_end(self):
        self._start_up_steps, redo_sync = self._plan_start_up()
        if self._start_up_steps or redo_sync:
            self._push_weights(self.global_steps)
            if redo_sync:
                self.weight_syncs += 1

    def _reissue_inflight_prompts(self, partition_id: str = "train") -> int:
        # Checkpoints are saved between generations, so they hold no in-flight prompt group; any
        # incomplete step was cleared by _plan_start_up and is regenerated in on_train_begin.
        return 0

    def fit(self, agent_loop_manager):
        if self.delayed_sync.any_overlap:
            self._watcher = GenerationWatcher(self.generations, interval=WATCHER_POLL_SECONDS)
        try:
            super().fit(agent_loop_manager)
        finally:
            if self._watcher is not None:
                self._watcher.stop()
                self._watcher = None

    def on_train_begin(self):
        # fit() has already advanced global_steps to the first step to run: the weights are one version older
        version = self.global_steps - 1
        self._in_training_loop = True
        self.measurements.start_window()
        if self._start_up_steps:
            if self._rollout_version != version:
                self._push_weights(version)
            self._generate(self._start_up_steps, version=version)
        self._sleep_rollout()

    def prepare_step(self) -> dict:
        # Nothing to submit: this step's batch was generated right after the push of its version.
        return {}

    def on_sample_end(self):
        # The engine already sleeps (it went to sleep right after generating this interval's batches).
        if self.curr_step_profile:
            self._stop_rollout_profiling()

    # ------------------------------------------------------------------ one training step, in verl's order
    # fit: step -> _step_once (sample this step's groups -> _compute_old_log_prob -> _compute_advantage ->
    # _update_actor) -> the step's staleness -> _save_checkpoint -> on_step_end (push, generate) -> validation ->
    # _compute_metrics -> _log_rollout_data

    def step(self, metrics: dict, timing_raw: dict) -> KVBatchMeta:
        batch = super().step(metrics, timing_raw)  # _step_once and what it calls, below
        step, prepared = self.global_steps - 1, self._prepared_step
        metrics.update(self.measurements.staleness(prepared, step))
        updated = not prepared.update_skipped and self.config.trainer.critic_warmup <= self.global_steps
        dp_size = max(self.actor_rollout_wg._dispatch_info["actor"]) + 1 if updated else 1  # what verl's _balance_batch read
        metrics.update(self.measurements.update_lag(batch, step, round(metrics[metric_names.BEHAVIOUR_VERSION]),
                                                    updated, dp_size))
        return batch

    def _step_once(self, metrics: dict, timing_raw: dict, sample_batch_size: int) -> KVBatchMeta:
        """verl's step (sample, old log-probs, advantages, update) on this step's groups after masking.

        When zero-variance masking removed every group there is nothing to learn from: the step makes no
        forward pass, no optimizer step and no learning-rate scheduler step. It returns the removed groups
        as its batch, untouched, only so that verl clears them from the TransferQueue at the end of the step.
        The step still counts in the schedule (lags, sync points and pushes are unchanged), so the
        policy version after it holds the same weights as the one before.
        """
        step = self.global_steps - 1
        self.generations.wait_for_step(step)  # with overlap its batch may still be generating
        prepared = self.replay_buffer.prepare_step(step, sample_batch_size)
        self._prepared_step = prepared
        if self.delayed_sync.zero_variance_masking:
            metrics[metric_names.ZERO_VARIANCE_GROUPS_REMOVED] = float(len(prepared.removed_uids))
            metrics[metric_names.ZERO_VARIANCE_GROUPS_REMOVED_FRACTION] = len(prepared.removed_uids) / prepared.group_count
        if prepared.update_skipped:
            logger.warning(
                f"delayed_sync: every one of the {prepared.group_count} prompt groups of step {step} has "
                "zero reward variance; no update at this step"
            )
            batch, _ = self.replay_buffer.sample(self.global_steps, TRAIN_PARTITION, sample_batch_size)
            self.on_sample_end()  # as after verl's own sampling (stops the rollout profiler of this step)
            return batch
        return super()._step_once(metrics, timing_raw, sample_batch_size)

    def _compute_old_log_prob(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        batch = super()._compute_old_log_prob(batch, metrics)
        metrics.update(self.measurements.mismatch_after_old_log_prob(batch, self.actor_rollout_wg))
        return batch

    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        # verl's estimators return only (advantages, returns); verl-ext's record their own metrics
        # (RED-Drop's dropped fraction) in verl_ext.algorithms.step_metrics, in this process
        batch = super()._compute_advantage(batch, metrics)
        metrics.update(step_metrics.pop_all())
        return batch

    def _update_actor(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """verl's update; in bypass mode it also measures the log-prob mismatch on its first mini-batch, before the
        first optimizer step (:mod:`verl_ext.staleness.mismatch_in_update`)."""
        if not self.measurements.in_the_update:
            return super()._update_actor(batch, metrics)
        batch.extra_info[UPDATE_KEY] = self.measurements.update_id(self.global_steps)
        try:
            batch = super()._update_actor(batch, metrics)
        finally:
            batch.extra_info.pop(UPDATE_KEY, None)
        metrics.update(self.measurements.mismatch_of_the_update(metrics, self.global_steps - 1))
        return batch

    def on_step_end(self):
        step = self.global_steps - 1
        synced = self.schedule.synced_after(step)
        if synced:
            version = self.global_steps  # the weights after this step
            # no push while batches of the previous version are being generated with the old weights
            self.generations.wait_for_all()
            with marked_timer("update_weights", self.timing_raw, color="red"):
                push_metrics = self._push_weights(version)
            self.weight_syncs += 1
            steps = list(self.schedule.steps_generated_with(version, self.total_training_steps))
            if steps:
                # a resumed run whose schedule changed may already hold some of them
                complete = self._read_pending_batches().complete_steps
                steps = [planned for planned in steps if planned not in complete]
            if steps:
                with marked_timer("gen", self.timing_raw, color="red"):
                    self._generate(steps, version=version)
            if not self._validation_follows():
                self._sleep_rollout()
        pending = getattr(self, "_pending_sync_metrics", None) or {}
        if synced:
            pending.update(push_metrics)  # the checkpoint engine's own figures (bytes, seconds), if it reports any
        pending.update(
            {
                metric_names.SYNCED: float(synced),
                metric_names.WEIGHT_SYNCS: float(self.weight_syncs),
                metric_names.WEIGHT_PUSHES: float(self.weight_pushes),
            }
        )
        self._pending_sync_metrics = pending

    def on_validate_begin(self):
        if self._rollout_version != self.global_steps:
            self._push_weights(self.global_steps)

    def on_validate_end(self):
        if self._in_training_loop:
            self._sleep_rollout()

    def _compute_metrics(self, batch: KVBatchMeta, metrics, timing_raw, global_steps, epoch):
        metrics.update(self.measurements.window_timing())
        if self._prepared_step is not None and self._prepared_step.update_skipped:
            # no update: the batch has no advantages, log-probs or update metrics for verl's batch metrics
            metrics.update({metric_names.GLOBAL_STEP: global_steps, metric_names.EPOCH: epoch})
            metrics.update({metric_names.timing(name): value for name, value in timing_raw.items()})
            return
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)

    def _log_rollout_data(self, batch: KVBatchMeta, timing_raw: dict, rollout_data_dir: str):
        if self._prepared_step is not None and self._prepared_step.update_skipped:
            return  # nothing was trained at this step
        super()._log_rollout_data(batch, timing_raw, rollout_data_dir)

    # ------------------------------------------------------------------ checkpoints

    def _save_checkpoint(self):
        # a checkpoint holds complete batches only: a resumed run restores them exactly (their generating
        # weights are not in the checkpoint, so a half-generated batch could not be finished the same way)
        self.generations.wait_for_all()
        # the state first: verl's save ends with latest_checkpointed_iteration.txt, the mark a resume follows,
        # so every checkpoint verl calls complete has its state (same folder as verl's, relative or not)
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        write_state(folder, DelayedSyncState(
            sync_interval=self.schedule.sync_interval,
            sync_offset=self.schedule.sync_offset,
            offline=self.schedule.offline,
            weight_syncs=self.weight_syncs,
            weight_pushes=self.weight_pushes,
            schedule_since=self.schedule_since,
        ))
        super()._save_checkpoint()

    def _load_checkpoint(self):
        # the state of the checkpoint verl is about to resume, read and checked before verl loads the weights:
        # a damaged one stops the resume (CheckpointStateError names the file and the field)
        folder = self._folder_to_resume()
        state = read_state(folder) if folder else None
        super()._load_checkpoint()
        if self.global_steps == 0:
            return
        if state is None:
            # as if this schedule had run from the start: its sync points, and the start-up push before them
            self.weight_syncs = self.schedule.sync_count(self.global_steps - 1)
            self.weight_pushes = self.weight_syncs + 1
            logger.warning(
                f"delayed_sync: no {STATE_FILE} in the checkpoint of step {self.global_steps} (written by another "
                f"trainer mode?); staleness/weight_syncs and weight_pushes restart from the schedule's counts "
                f"({self.weight_syncs}, {self.weight_pushes})"
            )
            return
        self.weight_syncs = state.weight_syncs
        self.weight_pushes = state.weight_pushes
        self.schedule_since = state.schedule_since
        current = (self.schedule.sync_interval, self.schedule.sync_offset, self.schedule.offline)
        if state.schedule() != current:
            self.schedule_since = self.global_steps
            logger.warning(
                "delayed_sync: the checkpoint was written with (sync_interval, sync_offset, offline) = "
                f"{state.schedule()}, this run uses {current}. Batches already generated keep their behaviour version; "
                "staleness/lag reports the measured lag, which differs from the new schedule until they are used."
            )

    def _folder_to_resume(self):
        """The ``global_step_<g>`` folder verl's ``_load_checkpoint`` resumes from, chosen as verl chooses it (the
        tracker file with ``resume_mode=auto``, ``trainer.resume_from_path``), or None (a fresh start): the
        driver's check chose the same one (:func:`verl_ext.checks.resume.resumed_folder`)."""
        return resumed_folder(self.config)

    # ------------------------------------------------------------------ rollout engine

    def _push_weights(self, version: int) -> dict:
        """Give the rollout engine the actor's current weights, labelled as policy ``version`` (a colocated engine
        is woken by it); returns the checkpoint engine's metrics (none for the colocated push).

        A failed push raises (verl's manager re-raises the checkpoint engine's error): the run ends rather than
        go on with an engine that holds another version than the schedule says."""
        self.generations.wait_for_all()  # never change the weights under a generation in flight
        metrics = self._weight_manager().update_weights(version)
        self._rollout_version = version
        self.weight_pushes += 1
        return dict(metrics or {})

    def _sleep_rollout(self) -> None:
        """Sleep the rollout engine (it discards its weights and KV cache); no-op when already asleep.

        A resident engine (``free_cache_engine=false``) never sleeps: it keeps the weights of its last push
        (verl's and the CPU rollout's ``sleep`` do nothing then), and with overlap it may be generating.
        """
        if self._engine_resident:
            return
        if self._rollout_version is not None:
            self._weight_manager().sleep_replicas()
            self._rollout_version = None

    def _validation_follows(self) -> bool:
        """Whether verl's fit() validates right after this step's on_step_end (same test as fit's)."""
        test_freq = self.config.trainer.test_freq
        is_last_step = self.global_steps >= self.total_training_steps
        return test_freq > 0 and (is_last_step or self.global_steps % test_freq == 0)

    def _generate(self, steps: list[int], version: int) -> None:
        """Generate the batches of ``steps`` with the weights the engine holds; wait for all of them unless
        ``overlap`` (then the steps and the next push wait, see :class:`GenerationTracker`).

        Each batch is the next ``data.train_batch_size`` prompts of the dataloader, in step order, so the
        data stream is the one of an uninterrupted ``sync`` run. Its ``global_steps`` is the global step that
        trains on it (step + 1), as in ``sync``, where a batch is generated at the step that uses it: the
        rollout's per-request sampling seeds derive from it (:mod:`verl_ext.seeding`), so with the same seed
        a step's batch is the same in every mode.
        """
        if self._rollout_version != version:
            raise RuntimeError(
                f"delayed_sync: asked to generate with version {version} while the rollout engine holds "
                f"{'no weights (asleep)' if self._rollout_version is None else self._rollout_version}"
            )
        if self.delayed_sync.overlap_at(steps[0]):  # a phased run may switch it at a phase's start
            self._submit(steps, version)
            logger.info(f"delayed_sync: version {version} is generating the batches of steps {steps} in the background")
            return
        # the trainer does nothing else until they are generated: preparing the next batch's prompts while the
        # engine generates the previous one is part of the wait, not generation hidden behind training
        with self.generations.waiting():
            self._submit(steps, version)
            self.generations.wait_for_all()
        logger.info(f"delayed_sync: version {version} generated the batches of steps {steps}")

    def _submit(self, steps: list[int], version: int) -> None:
        """Hand the batches of ``steps`` to the agent loop, each tagged with its step and generating version."""
        for step in steps:
            batch = self._next_train_batch()
            tu.assign_non_tensor_data(batch, "global_steps", step + 1)
            step_uids = [str(uid) for uid in batch["uid"]]
            tags = [
                {
                    "is_prompt": True,
                    "status": "pending",
                    "global_steps": step + 1,
                    STEP_TAG: step,
                    BEHAVIOUR_VERSION_TAG: version,
                }
                for _ in step_uids
            ]
            tq.kv_batch_put(keys=step_uids, partition_id=TRAIN_PARTITION, tags=tags)
            with self.generations.dispatching(version, {step: step_uids}):
                self.agent_loop_manager.generate_sequences(batch)

    def _finished_groups(self, uids: set[str]) -> set[str]:
        """The prompt groups of ``uids`` whose generation is over: terminal status, or already gone from
        TransferQueue (a group leaves it only after it was handed out, which waits for it)."""
        listing = (tq.kv_list(TRAIN_PARTITION) or {}).get(TRAIN_PARTITION, {})
        return {uid for uid in uids if uid not in listing or listing[uid].get("status") in TERMINAL_STATUSES}

    # ------------------------------------------------------------------ start-up and resume

    def _plan_start_up(self) -> tuple[list[int], bool]:
        """Which batches to generate before the first step, and whether a sync point is to be redone.

        At global step g (0 at a fresh start, the checkpoint's step after a resume) the pending FIFO must
        hold every step l in [g, T) with v(l) <= g. At a fresh start that is the start-up interval(s) of
        version 0. A checkpoint is saved inside step g - 1, before that step's sync point, so it holds the
        batches of older versions but not those of version g: when step g - 1 was a sync point the sync is
        redone with the checkpoint's weights, which are exactly version g. Steps that should be in the
        checkpoint but are not (saved by another mode, deleted, incomplete) are regenerated now, with
        version g: a logged warning lists them, and staleness/lag reports their true, smaller lag.
        """
        g, total = self.global_steps, self.total_training_steps
        if g >= total:
            return [], False
        pending = self._read_pending_batches()
        if pending.keys_to_clear:
            tq.kv_clear(keys=list(pending.keys_to_clear), partition_id=TRAIN_PARTITION)
            for reason, count in pending.clear_reasons().items():
                logger.warning(f"delayed_sync: cleared {count} TransferQueue entries at start-up: {reason}")
        needed = [step for step in range(g, total) if self.schedule.behaviour_version(step) <= g]
        missing = [step for step in needed if step not in pending.complete_steps]
        lost = [step for step in missing if self.schedule.behaviour_version(step) < g]
        if lost:
            logger.warning(
                f"delayed_sync: resuming at step {g}, the checkpoint lacks the generated batches of steps "
                f"{lost} (scheduled behaviour versions {[self.schedule.behaviour_version(s) for s in lost]}); "
                f"they are regenerated now with version {g}, from the next prompts of the dataloader. Their "
                "lag is smaller than scheduled; staleness/lag logs the measured value."
            )
        unexpected = sorted(pending.complete_steps - set(needed))
        if unexpected:
            logger.warning(
                f"delayed_sync: the checkpoint holds batches for steps {unexpected}, which this schedule "
                "generates later; they are used as they are (staleness/lag logs their measured lag)"
            )
        redo_sync = g > 0 and self.schedule.synced_after(g - 1)
        return missing, redo_sync

    def _read_pending_batches(self):
        listing = (tq.kv_list(TRAIN_PARTITION) or {}).get(TRAIN_PARTITION, {})
        return read_pending_batches(listing, self.config.data.train_batch_size)
