"""Staleness in optimizer updates (verl_ext.staleness.update_lag): the arithmetic, and verl's split of a step's
batch into updates reproduced exactly (checked against verl's own chunking and mini-batch iterator)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_ext.staleness.schedule import StalenessSchedule
from verl_ext.staleness.update_lag import (
    UpdateLag,
    scheduled_update_lag,
    update_index_groups,
    update_lag,
    updates_per_step,
)


def test_one_update_per_step_is_the_step_lag():
    """The papers' setting: one update per step, so the update lag is the step lag."""
    schedule = StalenessSchedule(sync_interval=3, sync_offset=1)
    for row in schedule.rows(0, 12):
        lag = scheduled_update_lag(row.lag, mini_batches=1, epochs=1)
        assert (lag.first, lag.last, lag.token_mean, lag.updates) == (row.lag, row.lag, row.lag, 1)


def test_two_mini_batches_two_epochs():
    """2 mini-batches x 2 epochs = 4 updates per step: a batch k steps old is 4k updates old at the step's first
    update and 4k + 3 at its last; update j trains mini-batch j mod 2."""
    assert updates_per_step(2, 2) == 4
    for k in range(5):
        lag = scheduled_update_lag(k, mini_batches=2, epochs=2)
        assert (lag.first, lag.last, lag.token_mean) == (4 * k, 4 * k + 3, 4 * k + 1.5)
    # tokens 30 (mini-batch 0) and 10 (mini-batch 1), twice: mean = 4k + (0*30 + 1*10 + 2*30 + 3*10) / 80
    assert update_lag(8, [30, 10, 30, 10]) == UpdateLag(first=8, last=11, token_mean=8 + 100 / 80, updates=4)


def test_padding_and_empty_steps():
    assert update_lag(3, []) is None  # no update at this step (every group masked out)
    assert update_lag(3, [0, 0]).token_mean == 3.5  # no token at all: the plain mean
    assert update_lag(0, [5, 0]).token_mean == 0.0  # a mini-batch of padding only weighs nothing


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 50), st.lists(st.integers(0, 1000), min_size=1, max_size=12))
def test_token_mean_is_the_mean_over_trained_tokens(before, tokens):
    """The mean is the lag of each trained token, averaged over the tokens (a token trained twice counts twice)."""
    lag = update_lag(before, tokens)
    per_token = [before + index for index, count in enumerate(tokens) for _ in range(count)]
    assert lag.first <= lag.token_mean <= lag.last
    if per_token:
        assert lag.token_mean == pytest.approx(sum(per_token) / len(per_token))


@pytest.mark.parametrize("bad", [-1, 1.5, True, None])
def test_bad_input_is_refused(bad):
    with pytest.raises(ValueError):
        update_lag(bad, [1])
    with pytest.raises(ValueError):
        updates_per_step(bad, 1)
    with pytest.raises(ValueError):
        scheduled_update_lag(bad, 1, 1)


def _verl_update_groups(batch_size, dp_size, mini_batch_size, epochs, shuffle, seed):
    """What verl does: KVBatchMeta.chunk over the data-parallel ranks, then each rank's make_iterator (the code of
    ActorWorker.train_mini_batch), zipped by update."""
    import torch
    from tensordict import TensorDict
    from transfer_queue import KVBatchMeta
    from verl.utils.tensordict_utils import make_iterator

    keys = [f"row{index}" for index in range(batch_size)]
    chunks = KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train").chunk(dp_size)
    per_rank = []
    for rank, chunk in enumerate(chunks):
        rows = torch.tensor([keys.index(key) for key in chunk.keys])
        data = TensorDict({"row": rows}, batch_size=[len(rows)])
        iterator = make_iterator(data, mini_batch_size=mini_batch_size // dp_size, epochs=epochs, seed=seed + rank,
                                 dataloader_kwargs={"shuffle": shuffle})
        per_rank.append([mini_batch["row"].tolist() for mini_batch in iterator])
    return [[row for rows in update for row in rows] for update in zip(*per_rank)]


@pytest.mark.parametrize("batch_size, dp_size, mini_batch_size, epochs", [
    (8, 1, 4, 2), (8, 2, 4, 2), (16, 2, 8, 3), (8, 1, 8, 1), (12, 2, 4, 1), (24, 4, 8, 2),
])
@pytest.mark.parametrize("shuffle", [False, True])
def test_update_groups_are_verls(batch_size, dp_size, mini_batch_size, epochs, shuffle):
    ours = update_index_groups(batch_size, dp_size, mini_batch_size, epochs, shuffle=shuffle, seed=42)
    assert ours == _verl_update_groups(batch_size, dp_size, mini_batch_size, epochs, shuffle, seed=42)
    assert len(ours) == (batch_size // mini_batch_size) * epochs
    for epoch in range(epochs):  # every row once per epoch
        per_epoch = ours[epoch * (batch_size // mini_batch_size):(epoch + 1) * (batch_size // mini_batch_size)]
        assert sorted(row for rows in per_epoch for row in rows) == list(range(batch_size))


def test_uneven_splits_are_refused():
    with pytest.raises(ValueError, match="does not split"):
        update_index_groups(10, 2, 4, 1, shuffle=False, seed=0)
    with pytest.raises(ValueError, match="does not split"):
        update_index_groups(8, 3, 6, 1, shuffle=False, seed=0)
