"""The behaviour-minus-current log-prob gap: a token mean over the response mask."""

import math

import pytest
import torch

from verl_ext.staleness.mismatch import mean_behaviour_minus_current_log_prob


def test_token_mean_over_the_mask_only():
    behaviour = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, float("nan")]])
    current = torch.tensor([[-1.5, -2.0, 100.0], [-1.0, -0.25, -7.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    expected = ((-1.0 + 1.5) + (-2.0 + 2.0) + (-0.5 + 1.0) + (-0.5 + 0.25)) / 4
    assert mean_behaviour_minus_current_log_prob(behaviour, current, mask) == pytest.approx(expected)


def test_equal_policies_give_zero_and_an_empty_mask_gives_nan():
    log_probs = torch.randn(3, 5)
    assert mean_behaviour_minus_current_log_prob(log_probs, log_probs.clone(), torch.ones(3, 5)) == 0.0
    assert math.isnan(mean_behaviour_minus_current_log_prob(log_probs, log_probs, torch.zeros(3, 5)))


def test_estimates_the_kl_of_behaviour_from_current_on_behaviour_samples():
    generator = torch.Generator().manual_seed(0)
    behaviour_probs = torch.tensor([0.7, 0.2, 0.1])
    current_probs = torch.tensor([0.5, 0.3, 0.2])
    tokens = torch.multinomial(behaviour_probs, 200_000, replacement=True, generator=generator).reshape(400, 500)
    gap = mean_behaviour_minus_current_log_prob(
        behaviour_probs.log()[tokens], current_probs.log()[tokens], torch.ones_like(tokens)
    )
    kl = float((behaviour_probs * (behaviour_probs.log() - current_probs.log())).sum())
    assert gap == pytest.approx(kl, abs=3e-3)


def test_shape_mismatch_is_rejected():
    with pytest.raises(ValueError, match="one shape"):
        mean_behaviour_minus_current_log_prob(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3))
