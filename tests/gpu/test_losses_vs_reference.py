"""Every loss (verl-ext's 13 and verl's vanilla) in float32 against a float64 CPU reference, through verl's
registry. The ``cpu`` variant runs everywhere and checks the comparison itself; the ``cuda`` variant (marker
``gpu``) is the CUDA check of issue 11. Tolerances and the clip-boundary allowance: tests/gpu/loss_reference.py."""

import pytest
import torch

from tests.gpu.loss_reference import compare, loss_and_gradient, loss_inputs
from verl_ext.algorithms.registry import POLICY_LOSSES

LOSSES = ["vanilla", *sorted(POLICY_LOSSES)]
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(scope="module")
def inputs():
    return loss_inputs()


@pytest.fixture(scope="module")
def reference(inputs):
    cache = {}

    def get(loss_mode):
        if loss_mode not in cache:
            cache[loss_mode] = loss_and_gradient(loss_mode, inputs, "cpu", torch.float64)
        return cache[loss_mode]

    return get


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("loss_mode", LOSSES)
def test_float32_on_the_device_matches_the_float64_reference(loss_mode, device, inputs, reference):
    reference_loss, reference_gradient = reference(loss_mode)
    assert torch.count_nonzero(reference_gradient) > reference_gradient.numel() // 10  # a real gradient to compare
    comparison = compare(*loss_and_gradient(loss_mode, inputs, device, torch.float32), reference_loss, reference_gradient)
    assert comparison.ok, f"{loss_mode} on {device}: {comparison}"


def test_the_comparison_fails_a_different_loss_or_a_slightly_wrong_gradient(inputs, reference):
    loss, gradient = loss_and_gradient("rec_oneside_is", inputs, "cpu", torch.float32)
    assert not compare(loss, gradient, *reference("rec_oneside_nois")).ok  # importance sampling left in
    reference_loss, reference_gradient = reference("rec_oneside_is")
    assert compare(loss, gradient, reference_loss, reference_gradient).ok
    assert not compare(loss, gradient * 1.001, reference_loss, reference_gradient).ok  # 0.1% off everywhere
    assert not compare(loss * 1.001, gradient, reference_loss, reference_gradient).ok
    flipped = gradient.clone()
    nonzero = torch.nonzero(flipped.flatten())[:3].flatten()
    flipped.view(-1)[nonzero] = 0.0  # three clip flips: more than the allowance at this size
    assert not compare(loss, flipped, reference_loss, reference_gradient).ok
