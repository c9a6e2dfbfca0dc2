"""The names of the per-step metrics verl-ext writes and reads: the one place each is spelled.

A metric name is a contract between the code that logs it and every reader (``verl-ext plot``, the lab's
summary, the smoke checks, the benchmarks, the CPU run summary). A reader that spells a name differently
finds nothing and reports "not logged" rather than failing, so each name is written once, here, and both
sides import it. Where a metrics file comes from and how it is read: :mod:`verl_ext.metrics_file`.

Two groups: the names verl-ext's own code writes, and the names verl writes that verl-ext reads (each
with the verl 0.9.1 module that writes it; a verl upgrade that renames one breaks only this file).

This module imports nothing heavy (no torch, no verl): readers load it without a training stack.
"""

from __future__ import annotations

import re

# ---------------------------------------------------------------------------------------------------------
# verl-ext's own metrics
# ---------------------------------------------------------------------------------------------------------

# Written by verl_ext.staleness.trainer (trainer.v1.trainer_mode=delayed_sync) at every training step.
LAG = "staleness/lag"  # steps between the policy that generated the batch and the current one
BEHAVIOUR_VERSION = "staleness/behaviour_version"  # weight version that generated the batch
WEIGHT_SYNCS = "staleness/weight_syncs"  # sync points passed so far
SYNCED = "staleness/synced"  # 1.0 when the weights were pushed after this step
WEIGHT_PUSHES = "staleness/weight_pushes"  # weight pushes so far, the start-up push included
# mean over response tokens of log pi_behaviour - log pi_current (delayed_sync.measure_mismatch=true); with
# bypass_mode=true taken from the actor update's first mini-batch (verl_ext.staleness.mismatch_in_update)
BEHAVIOUR_MINUS_CURRENT_LOG_PROB = "staleness/behaviour_minus_current_log_prob"
# the same over the whole batch from a separate actor forward pass (delayed_sync.mismatch_forward_pass=true)
BEHAVIOUR_MINUS_CURRENT_LOG_PROB_FORWARD_PASS = "staleness/behaviour_minus_current_log_prob_forward_pass"
# Returned by the actor's update (verl_ext.staleness.mismatch_in_update; verl logs them under "actor/") and taken
# out again by the delayed_sync trainer, which logs their ratio as BEHAVIOUR_MINUS_CURRENT_LOG_PROB: the sum over
# the first mini-batch's response tokens of log pi_behaviour - log pi_current, and the number of those tokens.
UPDATE_MISMATCH_GAP_SUM = "verl_ext_mismatch/gap_sum"
UPDATE_MISMATCH_TOKENS = "verl_ext_mismatch/tokens"
# Staleness in optimizer updates (verl_ext.staleness.update_lag): a step of M mini-batches x E epochs makes M x E
# updates; update j of step l takes its gradient at the policy sum_{s=v(l)}^{l-1} U_s + j updates after the behaviour
# policy. First and last update of the step, and the mean over the trained tokens (each update weighted by its
# mini-batch's loss_mask tokens). Not logged at a step that makes no update.
UPDATE_LAG_FIRST = "staleness/update_lag_first"
UPDATE_LAG_LAST = "staleness/update_lag_last"
UPDATE_LAG_TOKEN_MEAN = "staleness/update_lag_token_mean"
OPTIMIZER_UPDATES = "staleness/optimizer_updates"  # the step's optimizer updates (M x E; 0 when it makes none)
# staleness/lag weighted by tokens instead of trajectories: the mean over the trained (loss_mask) tokens of the step
# minus the version that generated their trajectory (verl's max_global_steps tag: the last turn's); a long multi-turn
# trajectory weighs as many tokens as it trains
LAG_TOKEN_MEAN = "staleness/lag_token_mean"
ZERO_VARIANCE_GROUPS_REMOVED = "staleness/zero_variance_groups_removed"
ZERO_VARIANCE_GROUPS_REMOVED_FRACTION = "staleness/zero_variance_groups_removed_fraction"
# Timing of each step's window: from the end of the previous step's window (the start of the training loop
# for the first step) to this step's metrics, validation included. See docs/staleness.md#overlap.
WAIT_FOR_BATCH_S = "staleness/wait_for_batch_s"
WAIT_FOR_GENERATION_S = "staleness/wait_for_generation_s"
GENERATION_HIDDEN_S = "staleness/generation_hidden_s"
ENGINE_BUSY_S = "staleness/engine_busy_s"
ENGINE_BUSY_FRACTION = "staleness/engine_busy_fraction"
STALENESS_TIMINGS = (WAIT_FOR_BATCH_S, WAIT_FOR_GENERATION_S, GENERATION_HIDDEN_S, ENGINE_BUSY_S, ENGINE_BUSY_FRACTION)

# Written by verl_ext.algorithms.red_drop's estimator (through verl_ext.algorithms.step_metrics; logged under
# the delayed_sync trainer mode only).
RED_DROP_DROPPED_FRACTION = "red_drop/dropped_fraction"

# ---------------------------------------------------------------------------------------------------------
# verl's metrics, read by verl-ext
# ---------------------------------------------------------------------------------------------------------

# verl/trainer/ppo/metric_utils.py (compute_data_metrics): the training batch.
SCORE_MEAN = "critic/score/mean"  # mean sequence score (the reward function's "score") of the batch
REWARDS_MEAN = "critic/rewards/mean"  # the same after any KL-in-reward penalty
RESPONSE_LENGTH_MEAN = "response_length/mean"

# verl/trainer/ppo/metric_utils.py (compute_timing_metrics): "timing_s/<phase>" for each timed phase.
TIMING_PREFIX = "timing_s/"
STEP_SECONDS = TIMING_PREFIX + "step"  # the whole training step

# verl/trainer/ppo/v1/trainer_base.py (and verl_ext.staleness.trainer, which logs the same pair): present
# in the records of steps that trained, absent in a validation-only record.
GLOBAL_STEP = "training/global_step"
EPOCH = "training/epoch"

# verl/trainer/ppo/v1/trainer_base.py (_compute_metrics), every v1 mode: how many policy versions the batch's
# trajectories lag behind the weights being trained, by the newest (staleness) and the oldest (worst: a partial
# rollout resumed across pushes) version that generated their tokens; per step, over the batch's trajectories.
TRAJECTORY_STALENESS_MEAN = "training/off_policy/trajectory_staleness/mean"
TRAJECTORY_STALENESS_WORST_MAX = "training/off_policy/trajectory_staleness_worst/max"
# max_global_steps - min_global_steps + 1 of each trajectory: how many policy versions generated its turns (1: one)
TRAJECTORY_SPANS_MAX = "training/off_policy/trajectory_spans/max"
# verl/trainer/ppo/metric_utils.py: turns per trajectory (the prompt counts as one: 2 for a single-turn response)
NUM_TURNS_MEAN = "num_turns/mean"

# verl_ext.cpu_runtime.checkpoint_engine (checkpoint-engine backend gloo): returned by each push, logged by verl at the
# step of the push (delayed_sync's sync points; every step in separate_async)
GLOO_WEIGHT_BYTES = "checkpoint_engine/gloo/weight_bytes"
GLOO_BUCKETS_SENT = "checkpoint_engine/gloo/buckets_sent"
GLOO_SEND_SECONDS = "checkpoint_engine/gloo/send_seconds"

# The actor's metrics, logged under "actor/" by verl's workers (verl/workers/engine_workers.py). verl's policy
# losses name their metrics "actor/<name>" (verl/trainer/ppo/core_algos.py); verl-ext's registered losses
# do the same with their terms' metrics (verl_ext.algorithms.verl_glue).
ACTOR_PREFIX = "actor/"
KL_LOSS = "actor/kl_loss"  # verl/workers/utils/losses.py: KL to the reference model (use_kl_loss)
# mean of log pi_old - log pi_theta over the micro-batch before the update (verl's losses and verl-ext's): with
# algorithm.rollout_correction.bypass_mode=true pi_old is the behaviour policy, so this estimates KL(behaviour || current)
PPO_KL = "actor/ppo_kl"
PG_CLIPFRAC = "actor/pg_clipfrac"  # verl/trainer/ppo/core_algos.py's losses, and verl-ext's (verl_ext.algorithms.verl_glue)
ENTROPY = "actor/entropy"  # verl/trainer/ppo/v1/trainer_base.py (actor.calculate_entropy=true)
ENTROPY_LOSS = "actor/entropy_loss"  # verl/workers/utils/losses.py
GRAD_NORM = "actor/grad_norm"  # verl/workers/engine_workers.py
MAX_MEMORY_ALLOCATED_GB = "actor/perf/max_memory_allocated_gb"  # verl/workers/engine_workers.py

# verl/trainer/ppo/v1/trainer_base.py (validation): "val-core/<data_source>/<variable>/mean@<N>", the mean
# over N samples per prompt; the variables verl-ext plots are the reward function's "acc" and "reward".
VALIDATION_MEAN = re.compile(r"^val-core/(?P<source>.+)/(?P<variable>acc|reward)/mean@(?P<samples>\d+)$")
VALIDATION_MEAN_TEXT = "val-core/<data_source>/acc/mean@N"  # for messages


# Measurements of the machine rather than of the training: wall-clock times, throughput, memory. They differ
# between two runs that train identically (verl_ext.cpu.run_comparison leaves them out).
TIMING_PER_TOKEN_PREFIX = "timing_per_token_ms/"  # verl/trainer/ppo/metric_utils.py (compute_timing_metrics)
PERF_PREFIX = "perf/"  # verl/trainer/ppo/metric_utils.py (compute_throughout_metrics) and the trainer's perf/mfu/*
ACTOR_PERF_PREFIX = "actor/perf/"  # verl/workers/engine_workers.py: memory of the actor's process
MEASUREMENT_PREFIXES = (TIMING_PREFIX, TIMING_PER_TOKEN_PREFIX, PERF_PREFIX, ACTOR_PERF_PREFIX)


def is_measurement(name: str) -> bool:
    """Whether metric ``name`` measures the machine (time, throughput, memory) rather than the training."""
    return name.startswith(MEASUREMENT_PREFIXES) or name in STALENESS_TIMINGS or name == GLOO_SEND_SECONDS


def timing(phase: str) -> str:
    """verl's name for the seconds a step spent in ``phase`` (``gen``, ``update_actor``, ``step``, ...)."""
    return TIMING_PREFIX + phase
