"""The mismatch metric inside the actor update (verl_ext/staleness/mismatch_in_update.py), on verl's own pieces.

Real: verl's padding helper, TensorDict non-tensor data (how verl hands ``extra_info`` to each micro-batch),
verl's ``Metric`` and the reductions verl's worker and trainer apply to a loss's metrics (per mini-batch: summed
over micro-batches and averaged over data-parallel ranks, ``Metric.aggregate_dp``; then ``reduce_metrics``
over mini-batches), and the wrapper that the plugin installs on verl's ``TrainingWorker.train_batch``. Stand-in:
the engine, which here runs a "forward pass" that returns given log-probs and calls the worker's loss on each
micro-batch as verl's engines do. The real actor update on the CPU backend is checked against a separate forward
pass in tests/staleness/test_e2e_cpu.py.
"""

import math

import pytest
import torch
from tensordict import TensorDict

from verl_ext import metric_names
from verl_ext.staleness import mismatch_in_update
from verl_ext.staleness.mismatch import mean_behaviour_minus_current_log_prob
from verl_ext.staleness.mismatch_in_update import UPDATE_KEY, MismatchMeasuringLoss, measured_train_batch

PROMPT_LENGTH = 3


def nested(rows):
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


def micro_batch(response_lengths, generator, update=None):
    """A micro-batch as verl's worker holds it: nested prompts, responses, pi_old (= behaviour in bypass mode),
    response mask; and the current policy's log-probs over prompt + response, as the engine's forward returns."""
    behaviour = [-torch.rand(length, generator=generator) for length in response_lengths]
    current = [-torch.rand(PROMPT_LENGTH + length, generator=generator) for length in response_lengths]
    data = TensorDict(
        {
            "prompts": nested([torch.ones(PROMPT_LENGTH, dtype=torch.long) for _ in response_lengths]),
            "responses": nested([torch.ones(length, dtype=torch.long) for length in response_lengths]),
            "old_log_probs": nested(behaviour),
            "response_mask": nested([torch.ones(length, dtype=torch.long) for length in response_lengths]),
        },
        batch_size=len(response_lengths),
    )
    if update is not None:
        from verl.utils import tensordict_utils as tu

        tu.assign_non_tensor_data(data, UPDATE_KEY, update)
    # the current log-prob of response token t sits at position prompt + t - 1 of the sequence (next-token)
    current_of_response = [row[PROMPT_LENGTH - 1: PROMPT_LENGTH - 1 + length] for row, length in zip(current, response_lengths)]
    return data, {"log_probs": nested(current)}, behaviour, current_of_response


def verl_loss(model_output, data, dp_group=None):
    """Stands for verl's ppo_loss: a loss and one of verl's own metrics."""
    from verl.utils.metric import AggregationType, Metric

    return torch.tensor(1.0), {"actor/pg_loss": Metric(AggregationType.SUM, 0.5)}


class StandInTrainingWorker:
    """verl's TrainingWorker as far as the wrapper sees it: ``loss_fn`` (its public attribute) and ``train_batch``
    on one mini-batch, whose engine calls the loss on each micro-batch and appends each metric as verl's engine
    does (``append_to_dict``: a Metric gathers its micro-batches' values)."""

    def __init__(self):
        self.loss_fn = verl_loss
        self.calls = []

    def train_batch(self, data):
        from verl.utils import tensordict_utils as tu
        from verl.utils.py_functional import append_to_dict

        self.calls.append(self.loss_fn)
        metrics = {}
        for micro, model_output in tu.get_non_tensor_data(data, "micro_batches", None):
            _loss, micro_metrics = self.loss_fn(model_output=model_output, data=micro, dp_group=None)
            append_to_dict(metrics, micro_metrics)
        return metrics


StandInTrainingWorker.train_batch = measured_train_batch(StandInTrainingWorker.train_batch)


def mini_batch(micro_batches, update):
    """A mini-batch as train_batch receives it, with the trainer's mark (verl's extra_info) as non-tensor data;
    here it carries its (micro-batch, forward output) pairs too."""
    from verl.utils import tensordict_utils as tu

    data = TensorDict({}, batch_size=[])
    tu.assign_non_tensor_data(data, "micro_batches", micro_batches)
    if update is not None:
        tu.assign_non_tensor_data(data, UPDATE_KEY, update)
    return data


def reduce_like_verl(per_rank_mini_batches):
    """verl's reductions of a loss's metrics: each mini-batch over its ranks (``Metric.aggregate_dp``), then, in the
    trainer, every mini-batch's value under ``actor/`` (``reduce_metrics``)."""
    from verl.utils.metric import Metric, reduce_metrics
    from verl.utils.py_functional import append_to_dict, rename_dict

    per_mini_batch = {}
    for ranks in zip(*per_rank_mini_batches):  # the same mini-batch on every rank
        output = {key: Metric.aggregate_dp([rank[key] for rank in ranks]) for key in ranks[0]}
        append_to_dict(per_mini_batch, output)
    return reduce_metrics(rename_dict(per_mini_batch, metric_names.ACTOR_PREFIX))


def test_the_first_mini_batch_gives_the_token_mean_over_all_its_micro_batches_and_ranks():
    """Two ranks, micro-batches of unequal token counts, two mini-batches: the logged number is the token mean of
    the first mini-batch over both ranks (not a mean of micro-batch means), and the second mini-batch (after the
    optimizer step) is not measured."""
    generator = torch.Generator().manual_seed(0)
    update = "run:1"
    lengths = {0: [[5, 1], [2]], 1: [[7], [3, 3, 1]]}  # rank -> micro-batches -> response lengths
    per_rank, behaviour, current = [], [], []
    for rank in (0, 1):
        worker = StandInTrainingWorker()
        first = [micro_batch(micro, generator, update) for micro in lengths[rank]]
        second = [micro_batch(micro, generator, update) for micro in lengths[rank]]
        outputs = [worker.train_batch(mini_batch([(data, output) for data, output, _, _ in mini], update))
                   for mini in (first, second)]
        per_rank.append(outputs)
        behaviour += [row for _, _, rows, _ in first for row in rows]
        current += [row for _, _, _, rows in first for row in rows]
        assert isinstance(worker.calls[0], MismatchMeasuringLoss) and worker.calls[1] is verl_loss
        assert worker.loss_fn is verl_loss  # restored
    metrics = reduce_like_verl(per_rank)
    gap = mismatch_in_update.pop_update_mismatch(metrics)
    expected = float(sum((b.double() - c.double()).sum() for b, c in zip(behaviour, current)) / sum(len(b) for b in behaviour))
    assert gap == pytest.approx(expected, abs=1e-12)
    assert set(metrics) == {"actor/pg_loss"}  # taken out; verl's own metrics untouched


def test_the_gap_equals_the_whole_batch_formula_on_one_micro_batch():
    generator = torch.Generator().manual_seed(1)
    data, model_output, behaviour, current = micro_batch([4, 2, 6], generator, "run:1")
    _loss, metrics = MismatchMeasuringLoss(verl_loss)(model_output=model_output, data=data)
    padded = lambda rows: torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)  # noqa: E731
    mask = padded([torch.ones(len(row)) for row in behaviour])
    expected = mean_behaviour_minus_current_log_prob(padded(behaviour), padded(current), mask)
    gap_sum = metrics[metric_names.UPDATE_MISMATCH_GAP_SUM].aggregate()
    tokens = metrics[metric_names.UPDATE_MISMATCH_TOKENS].aggregate()
    assert tokens == 12 and gap_sum / tokens == pytest.approx(expected, abs=1e-12)
    assert "actor/pg_loss" in metrics


def test_unmarked_batches_run_untouched_and_each_update_measures_once():
    generator = torch.Generator().manual_seed(2)
    worker = StandInTrainingWorker()
    for update in (None, "run:1", "run:1", "run:2", None, "run:2"):
        data, output, _, _ = micro_batch([2], generator, update)
        metrics = worker.train_batch(mini_batch([(data, output)], update))
        measured = metric_names.UPDATE_MISMATCH_GAP_SUM in metrics
        assert measured == isinstance(worker.calls[-1], MismatchMeasuringLoss)
    assert [isinstance(call, MismatchMeasuringLoss) for call in worker.calls] == [False, True, False, True, False, False]


def test_the_workers_loss_is_restored_when_the_update_fails():
    def failing_loss(model_output, data, dp_group=None):
        raise RuntimeError("out of memory")

    worker = StandInTrainingWorker()
    worker.loss_fn = failing_loss
    data, output, _, _ = micro_batch([2], torch.Generator().manual_seed(3), "run:1")
    with pytest.raises(RuntimeError, match="out of memory"):
        worker.train_batch(mini_batch([(data, output)], "run:1"))
    assert worker.loss_fn is failing_loss


def test_no_measurement_and_no_token_give_none_and_nan():
    assert mismatch_in_update.pop_update_mismatch({"actor/pg_loss": 1.0}) is None
    empty = {metric_names.ACTOR_PREFIX + metric_names.UPDATE_MISMATCH_GAP_SUM: 0.0,
             metric_names.ACTOR_PREFIX + metric_names.UPDATE_MISMATCH_TOKENS: 0.0}
    assert math.isnan(mismatch_in_update.pop_update_mismatch(empty))


def test_wrapping_twice_wraps_once():
    assert measured_train_batch(StandInTrainingWorker.train_batch) is StandInTrainingWorker.train_batch
