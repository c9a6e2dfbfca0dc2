"""``staleness/behaviour_minus_current_log_prob`` taken from the actor update's own forward pass: no extra pass.

With ``algorithm.rollout_correction.bypass_mode=true`` (the recipe's default) pi_old is the behaviour log-prob,
and nothing computes the current policy's log-probs before the update -- except the update itself. Its first
mini-batch runs every micro-batch's forward pass with the weights the step starts from (verl's engine steps
the optimizer only after the whole mini-batch, ``Engine.train_batch``), and each of those passes hands the loss
both log-probs: the current ones it just computed and pi_old = the behaviour's. So the metric costs two sums
per micro-batch instead of a forward pass over the batch. How:

- the trainer (:class:`verl_ext.staleness.trainer.DelayedSyncTrainer`) marks the batch it gives verl's
  ``update_actor`` with an id of that update (:data:`UPDATE_KEY` in the batch's ``extra_info``, which verl hands
  to every mini- and micro-batch as non-tensor data);
- in the actor's worker process, verl's ``TrainingWorker.train_batch`` (one call per mini-batch) is wrapped
  (:func:`install`, when verl imports its engine workers; listed in :mod:`verl_ext.verl_internals`): the first
  call of a marked update runs with :class:`MismatchMeasuringLoss` around the worker's own loss function (verl's
  ``ppo_loss`` with whatever policy loss, verl's own or verl-ext's), which adds two metrics per micro-batch,
  the sum over its response tokens of log pi_behaviour - log pi_current and the number of those tokens, with
  verl's SUM aggregation; every other call, and every unmarked batch, runs untouched;
- verl's worker reduces them as it reduces its own loss metrics (summed over micro-batches, averaged over
  data-parallel ranks: both sums are divided by the same world size), and the trainer takes them out of the
  update's metrics and logs their ratio (:func:`pop_update_mismatch`).

What the number is: the mean over the **first mini-batch's** response tokens (all its micro-batches, all ranks)
of log pi_behaviour - log pi_current, every one computed before the first optimizer step of the step. With one
mini-batch per step (``ppo_mini_batch_size`` = ``data.train_batch_size``, the papers' setting) that is the whole
batch: the number the separate forward pass measured, to float rounding (a training forward and an inference
forward batch the tokens differently). With several mini-batches it is the first one's (a sample of the batch;
shuffled when ``actor.shuffle`` is); with ``ppo_epochs`` > 1, the first epoch's. The separate pass over the
whole batch is still there on request: ``trainer.v1.delayed_sync.mismatch_forward_pass=true`` logs it as
``staleness/behaviour_minus_current_log_prob_forward_pass`` (one actor forward pass per step).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, Optional

import torch

from verl_ext import metric_names
from verl_ext.staleness import VERL_ENGINE_WORKERS_MODULE
from verl_ext.staleness.mismatch import behaviour_minus_current_sums, gap_from_sums

# the non-tensor key of an update's batch that asks for the measurement: the update's id
UPDATE_KEY = "verl_ext_measure_mismatch_update"
PATCH_MARK = "__verl_ext_patch__"
PATCH_NAME = "mismatch_in_update"

# the id of the last update each TrainingWorker measured: only its first mini-batch is measured
_measured_update: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


class MismatchMeasuringLoss:
    """A worker's loss function, plus the two sums of the gap on each micro-batch (module docstring).

    Called as verl's engines call a loss: ``(model_output=..., data=..., dp_group=...)``; ``model_output["log_probs"]``
    holds the current policy's log-probs of the micro-batch (nested, as the engine returns them), ``data`` the
    micro-batch with ``old_log_probs`` (the behaviour's, in bypass mode) and ``response_mask``.
    """

    def __init__(self, loss_function: Callable):
        self.loss_function = loss_function

    def __call__(self, model_output, data, dp_group=None):
        from verl.utils.metric import AggregationType, Metric
        from verl.workers.utils.padding import no_padding_2_padding

        with torch.no_grad():
            current = no_padding_2_padding(model_output["log_probs"], data).detach()
            fields = data.select("old_log_probs", "response_mask").to_padded_tensor()
            gap_sum, tokens = behaviour_minus_current_sums(fields["old_log_probs"], current, fields["response_mask"])
        loss, metrics = self.loss_function(model_output=model_output, data=data, dp_group=dp_group)
        metrics = dict(metrics)
        metrics[metric_names.UPDATE_MISMATCH_GAP_SUM] = Metric(AggregationType.SUM, gap_sum)
        metrics[metric_names.UPDATE_MISMATCH_TOKENS] = Metric(AggregationType.SUM, tokens)
        return loss, metrics


def _update_of(data) -> Optional[Any]:
    from verl.utils import tensordict_utils as tu

    return tu.get_non_tensor_data(data=data, key=UPDATE_KEY, default=None)


def measured_train_batch(train_batch: Callable) -> Callable:
    """``TrainingWorker.train_batch`` (one mini-batch: forward and backward of each micro-batch, then the
    optimizer step) that measures the first mini-batch of each marked update (module docstring)."""
    if getattr(train_batch, PATCH_MARK, None) == PATCH_NAME:
        return train_batch

    @functools.wraps(train_batch)
    def wrapper(self, data, *args, **kwargs):
        update = _update_of(data)
        if update is None or _measured_update.get(self) == update:
            return train_batch(self, data, *args, **kwargs)
        _measured_update[self] = update
        loss_function = self.loss_fn
        self.loss_fn = MismatchMeasuringLoss(loss_function)
        try:
            return train_batch(self, data, *args, **kwargs)
        finally:
            self.loss_fn = loss_function

    setattr(wrapper, PATCH_MARK, PATCH_NAME)
    return wrapper


def install(engine_workers_module=None) -> None:
    """Wrap verl's ``TrainingWorker.train_batch`` in this process (idempotent); the post-import hook on
    :data:`VERL_ENGINE_WORKERS_MODULE` calls it (:func:`verl_ext.staleness.register_staleness`)."""
    if engine_workers_module is None:
        import importlib

        engine_workers_module = importlib.import_module(VERL_ENGINE_WORKERS_MODULE)
    worker = engine_workers_module.TrainingWorker
    worker.train_batch = measured_train_batch(worker.train_batch)


def pop_update_mismatch(metrics: dict) -> Optional[float]:
    """Take the two sums out of an update's reduced metrics (verl logs the worker's metrics under ``actor/``) and
    return their ratio, the gap; None when the update did not measure (no marked mini-batch ran)."""
    gap_sum = metrics.pop(metric_names.ACTOR_PREFIX + metric_names.UPDATE_MISMATCH_GAP_SUM, None)
    tokens = metrics.pop(metric_names.ACTOR_PREFIX + metric_names.UPDATE_MISMATCH_TOKENS, None)
    if gap_sum is None or tokens is None:
        return None
    return gap_from_sums(float(gap_sum), float(tokens))
