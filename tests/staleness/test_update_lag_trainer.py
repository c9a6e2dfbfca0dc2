"""The delayed_sync trainer's lag counted in optimizer updates (staleness/update_lag_*), in verl's real ``fit`` loop
(tests/staleness/fit_harness.py): the actor stand-in splits each batch with verl's own mini-batch iterator and
records each update's tokens, and the logged figures must be the arithmetic of verl_ext.staleness.update_lag over
what it trained."""

import pytest

from tests.staleness.fit_harness import STEPS, Run, compose
from tests.staleness.test_zero_variance_masking import ALL_EQUAL_STEP, MASKING, reward
from verl_ext import metric_names
from verl_ext.staleness.schedule import StalenessSchedule
from verl_ext.staleness.update_lag import update_lag

SCHEDULE = StalenessSchedule(sync_interval=3, sync_offset=1)
KNOBS = ("trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
TWO_BY_TWO = ("actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.actor.ppo_epochs=2")
NAMES = (metric_names.UPDATE_LAG_FIRST, metric_names.UPDATE_LAG_LAST, metric_names.UPDATE_LAG_TOKEN_MEAN)


def trained_tokens(index: int, session: int) -> int:
    """Responses train 1 to 3 of their 3 tokens (the others masked, as a tool's output would be): mini-batches of
    different token counts, so a token-weighted mean differs from the plain mean."""
    return 1 + (index + session) % 3


def expected(run) -> dict[int, tuple]:
    """Per trained step: (first, last, token mean) from the updates the actor stand-in made (verl's iterator)."""
    per_step = {}
    for step, tokens in zip(run.actor.trained_steps, run.actor.mini_batch_token_counts):
        per_step[step] = tokens
    figures = {}
    for step in range(STEPS):
        version = SCHEDULE.behaviour_version(step)
        before = sum(len(per_step.get(earlier, [])) for earlier in range(version, step))
        lag = update_lag(before, per_step.get(step, []))
        if lag is not None:
            figures[step] = (lag.first, lag.last, lag.token_mean)
    return figures


def assert_figures(figures: dict, wanted: dict) -> None:
    assert sorted(figures) == sorted(wanted)
    for step, (first, last, mean) in wanted.items():
        assert figures[step][:2] == (first, last), step
        assert figures[step][2] == pytest.approx(mean, rel=1e-12), step


def logged(run) -> dict[int, tuple]:
    firsts, lasts, means = ({step: values[name] for step, values in run.metrics.items() if name in values}
                            for name in NAMES)
    assert set(firsts) == set(lasts) == set(means)
    return {step: (firsts[step], lasts[step], means[step]) for step in firsts}


@pytest.mark.parametrize("shuffle", [False, True])
def test_two_mini_batches_two_epochs(transfer_queue, dataset_file, tmp_path, log_dir, shuffle):
    """4 updates per step: step l's batch, k = lag steps old, is 4k updates old at its first update and 4k + 3 at its
    last; the token mean is weighted by the mini-batches' loss_mask tokens as verl split them."""
    run = Run(compose(dataset_file, tmp_path, *KNOBS, *TWO_BY_TWO, f"actor_rollout_ref.actor.shuffle={shuffle}"),
              transfer_queue, log_dir, f"two_by_two_{shuffle}", trained_tokens=trained_tokens)
    lags = run.logged("staleness/lag")
    assert lags == {row.step: row.lag for row in SCHEDULE.preview(STEPS)}
    assert run.logged(metric_names.OPTIMIZER_UPDATES) == {step: 4.0 for step in range(STEPS)}
    figures = logged(run)
    assert_figures(figures, expected(run))
    for step, (first, last, mean) in figures.items():
        assert (first, last) == (4 * lags[step], 4 * lags[step] + 3)
        assert first < mean < last
    # the mini-batches differ in tokens (else the test could not tell a token weight from a plain mean)
    assert any(len(set(tokens)) > 1 for tokens in run.actor.mini_batch_token_counts)


def test_zero_variance_masking_counts_the_updates_made(transfer_queue, dataset_file, tmp_path, log_dir):
    """Masking changes a step's mini-batches (one at a step with two groups left, none at the all-removed step): the
    update lag counts the updates really made in between, and a step without update logs none."""
    run = Run(compose(dataset_file, tmp_path, *KNOBS, MASKING, *TWO_BY_TWO), transfer_queue, log_dir, "masked_updates",
              reward=reward, trained_tokens=trained_tokens)
    updates = run.logged(metric_names.OPTIMIZER_UPDATES)
    assert updates[ALL_EQUAL_STEP] == 0.0 and set(updates.values()) - {0.0} <= {2.0, 4.0}
    assert 2.0 in updates.values()  # a step with fewer mini-batches than nominal
    figures = logged(run)
    assert ALL_EQUAL_STEP not in figures
    assert_figures(figures, expected(run))
