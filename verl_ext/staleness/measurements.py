"""What a ``delayed_sync`` step measures (the trainer, :mod:`verl_ext.staleness.trainer`, orchestrates; this measures).

- the batch's behaviour version and lag, as the rollout stamped them (:meth:`StepMeasurements.staleness`);
- the lag counted in optimizer updates and weighted by trained tokens (:meth:`StepMeasurements.update_lag`,
  :mod:`verl_ext.staleness.update_lag`);
- the log-prob mismatch between the behaviour and the current policy: from the actor update's own forward pass
  (bypass mode, :mod:`verl_ext.staleness.mismatch_in_update`), from verl's recomputed pi_old, or from a forward pass of
  its own (:meth:`StepMeasurements.mismatch_after_old_log_prob`, :meth:`StepMeasurements.mismatch_of_the_update`);
- the generation timing of the step's window: waits for batches and generations, generation hidden behind
  training, engine busy time (:meth:`StepMeasurements.window_timing`, :mod:`verl_ext.staleness.generation_tracker`).

Every figure goes out under the name :mod:`verl_ext.metric_names` gives it.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import TYPE_CHECKING

import numpy as np
import torch
import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.workers.utils.padding import response_from_nested

from verl_ext import metric_names
from verl_ext.staleness.config import DelayedSyncConfig
from verl_ext.staleness.generation_tracker import GenerationTracker, WindowTiming
from verl_ext.staleness.mismatch import mean_behaviour_minus_current_log_prob
from verl_ext.staleness.mismatch_in_update import pop_update_mismatch
from verl_ext.staleness.pending_batches import BEHAVIOUR_VERSION_TAG
from verl_ext.staleness.schedule import StalenessSchedule
from verl_ext.staleness.update_lag import UpdateCounter, update_index_groups, update_lag

if TYPE_CHECKING:  # the replay buffer imports verl's trainer, whose import registers the trainer that imports this
    from verl_ext.staleness.replay_buffer import PreparedStep

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))


def timing_metrics(timing: WindowTiming) -> dict[str, float]:
    """The staleness/ timing metrics of one step's window."""
    return {
        metric_names.WAIT_FOR_BATCH_S: timing.wait_for_batch,
        metric_names.WAIT_FOR_GENERATION_S: timing.wait_for_generation,
        metric_names.GENERATION_HIDDEN_S: timing.generation_hidden,
        metric_names.ENGINE_BUSY_S: timing.engine_busy,
        metric_names.ENGINE_BUSY_FRACTION: timing.engine_busy_fraction,
    }


class StepMeasurements:
    """The measurements of one ``delayed_sync`` run, step after step (see the module docstring)."""

    def __init__(self, config, delayed_sync: DelayedSyncConfig, schedule: StalenessSchedule, generations: GenerationTracker):
        self.config = config
        self.delayed_sync = delayed_sync
        self.schedule = schedule
        self.generations = generations
        # pi_old is the behaviour policy (bypass mode): the mismatch metric comes from the actor update's forward pass
        rollout_correction = config.algorithm.get("rollout_correction", None)
        self.pi_old_is_behaviour = bool(rollout_correction and rollout_correction.get("bypass_mode", False))
        self._run_id = uuid.uuid4().hex  # makes each update's id (UPDATE_KEY) unique to this run
        self._window_start: float | None = None
        # optimizer updates per step, for the lag counted in updates (verl_ext.staleness.update_lag)
        actor = config.actor_rollout_ref.actor
        self.update_counter = UpdateCounter(
            int(actor.ppo_epochs) * (int(config.data.train_batch_size) // int(actor.ppo_mini_batch_size)))

    # ------------------------------------------------------------------ the step's window

    def start_window(self) -> None:
        self._window_start = self.generations.clock()

    def window_timing(self) -> dict[str, float]:
        """The timing metrics of the window since the last call (or :meth:`start_window`); the next one starts now."""
        now = self.generations.clock()
        start = self._window_start if self._window_start is not None else now
        self._window_start = now
        return timing_metrics(self.generations.timing(start, now))

    # ------------------------------------------------------------------ staleness of the batch

    def staleness(self, prepared: PreparedStep, step: int) -> dict[str, float]:
        """staleness/behaviour_version and staleness/lag of step ``step``'s batch, as the rollout reported them.

        The version is the one the rollout engine stamped on each trajectory (verl's ``max_global_steps``
        tag: the label of the last weight push it received); when a rollout does not stamp it, the version
        the trainer pushed before generating the batch (the prompt tag) is used. All the step's groups
        count, those removed by zero-variance masking included: they were generated together.
        """
        versions = [tag.get("max_global_steps") for tag in prepared.trajectory_tags]
        if not versions or any(version is None for version in versions):
            versions = [tag.get(BEHAVIOUR_VERSION_TAG) for tag in prepared.prompt_tags]
        behaviour_version = float(np.mean(versions))
        if min(versions) != max(versions):
            logger.warning(f"delayed_sync: the batch of step {step} mixes behaviour versions {sorted(set(versions))}")
        scheduled = self.schedule.behaviour_version(step)
        if behaviour_version != scheduled:
            logger.warning(
                f"delayed_sync: the batch of step {step} was generated by version {behaviour_version:g}, "
                f"the schedule says {scheduled} (see the start-up warnings of a resumed run)"
            )
        return {metric_names.BEHAVIOUR_VERSION: behaviour_version, metric_names.LAG: step - behaviour_version}

    def update_lag(self, batch: KVBatchMeta, step: int, behaviour_version: int, updated: bool, dp_size: int) -> dict:
        """The step's lag counted in optimizer updates (:mod:`verl_ext.staleness.update_lag`): verl's split of the
        batch it just trained (``updated``; over ``dp_size`` ranks) into updates, each weighted by its mini-batch's
        ``loss_mask`` tokens; and the step lag weighted by those tokens (each trajectory's version: its
        ``max_global_steps`` tag)."""
        tokens: list[int] = []
        weighted: list[tuple[int, int]] = []  # (trained tokens, version) of each trajectory
        if updated:
            actor = self.config.actor_rollout_ref.actor
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["loss_mask"])
            row_tokens = [int(row.sum()) for row in data["loss_mask"].unbind()]
            groups = update_index_groups(
                len(row_tokens),
                dp_size=dp_size,
                mini_batch_size=int(actor.ppo_mini_batch_size) * int(self.config.actor_rollout_ref.rollout.n),
                epochs=int(actor.ppo_epochs),
                shuffle=bool(actor.shuffle),
                seed=int(actor.data_loader_seed),
            )
            tokens = [sum(row_tokens[row] for row in rows) for rows in groups]
            weighted = [(count, tag["max_global_steps"]) for count, tag in zip(row_tokens, batch.tags)
                        if not tag.get("is_padding", False) and tag.get("max_global_steps") is not None]
        if self.update_counter.first_step is None and step > 0 and self.delayed_sync.zero_variance_masking:
            logger.warning(
                f"delayed_sync: resumed at step {step}; staleness/update_lag_* count "
                f"{self.update_counter.nominal} updates for each step before it (zero-variance masking may have "
                "made fewer there)")
        lag = update_lag(self.update_counter.between(behaviour_version, step), tokens)
        self.update_counter.record(step, len(tokens))
        metrics = {metric_names.OPTIMIZER_UPDATES: float(len(tokens))}
        if sum(count for count, _ in weighted) > 0:
            metrics[metric_names.LAG_TOKEN_MEAN] = step - sum(count * version for count, version in weighted) / sum(
                count for count, _ in weighted)
        if lag is not None:
            metrics.update({
                metric_names.UPDATE_LAG_FIRST: float(lag.first),
                metric_names.UPDATE_LAG_LAST: float(lag.last),
                metric_names.UPDATE_LAG_TOKEN_MEAN: lag.token_mean,
            })
        return metrics

    # ------------------------------------------------------------------ the log-prob mismatch

    @property
    def in_the_update(self) -> bool:
        """Whether the actor update measures the mismatch in its own forward pass (bypass mode)."""
        return self.delayed_sync.measure_mismatch and self.pi_old_is_behaviour

    def update_id(self, global_steps: int) -> str:
        """The id the actor update's mismatch is filed under (``batch.extra_info[UPDATE_KEY]``)."""
        return f"{self._run_id}:{global_steps}"

    def mismatch_after_old_log_prob(self, batch: KVBatchMeta, actor_wg) -> dict[str, float]:
        """After verl computed pi_old: the mismatch against it when verl recomputed it with the current actor, or
        from a forward pass of the actor (``actor_wg``) in bypass mode with ``mismatch_forward_pass``."""
        if not self.delayed_sync.measure_mismatch:
            return {}
        if not self.pi_old_is_behaviour:  # verl has just computed pi_old with the current actor: reuse it
            return {metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB: mismatch_against(batch, "old_log_probs")}
        if self.delayed_sync.mismatch_forward_pass:
            return {metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB_FORWARD_PASS: mismatch_from_a_forward_pass(
                actor_wg, batch, self.config.actor_rollout_ref.rollout.temperature)}
        return {}

    def mismatch_of_the_update(self, update_metrics: dict, step: int) -> dict[str, float]:
        """The mismatch the actor update of step ``step`` measured, taken out of its metrics (a warning when the
        update returned none: its wrapper was not installed in the actor's process)."""
        gap = pop_update_mismatch(update_metrics)
        if gap is None:
            logger.warning(
                f"delayed_sync: the actor update of step {step} returned no log-prob mismatch "
                f"({metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB} is not logged for it): was the update wrapper "
                "installed in the actor's process? (verl-ext doctor)"
            )
            return {}
        return {metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB: gap}


def mismatch_from_a_forward_pass(actor_wg, batch: KVBatchMeta, temperature: float) -> float:
    """The mismatch over the whole batch from one forward pass of the actor (``mismatch_forward_pass=true``; in
    bypass mode nothing else computes the current policy's log-probs of the whole batch)."""
    batch.extra_info.update({"calculate_entropy": False, "compute_loss": False, "temperature": temperature})
    output = actor_wg.compute_log_prob(batch)
    assert len(output) == len(batch)
    return mismatch_against(batch, "log_probs")


def mismatch_against(batch: KVBatchMeta, current_field: str) -> float:
    """staleness/behaviour_minus_current_log_prob on this batch (see :mod:`verl_ext.staleness.mismatch`), the
    current policy's log-probs read from ``current_field`` of the batch."""
    data = tq.kv_batch_get(
        keys=batch.keys,
        partition_id=batch.partition_id,
        select_fields=[current_field, "rollout_log_probs", "response_mask"],
    )
    current = data.pop(current_field)
    if current_field == "log_probs":  # the forward pass's output covers prompt and response
        current = response_from_nested(current, data["response_mask"])
    data["current_log_probs"] = current
    padded = data.to_padded_tensor()
    real_rows = torch.tensor([not tag.get("is_padding", False) for tag in batch.tags], dtype=torch.bool)
    response_mask = padded["response_mask"] * real_rows.unsqueeze(1).to(padded["response_mask"].dtype)
    return mean_behaviour_minus_current_log_prob(
        padded["rollout_log_probs"], padded["current_log_probs"], response_mask
    )
