"""compare_runs: every difference between two runs' logged metrics and pushed checksums, and nothing else;
and the float-reduction-order bound (REDUCTION_ORDER) it offers for a different world size, measured."""

import torch

from verl_ext.cpu.run_comparison import EXACT, REDUCTION_ORDER, Tolerance, compare_runs, weight_pushes

from verl_ext.metric_names import GRAD_NORM, MAX_MEMORY_ALLOCATED_GB, SCORE_MEAN, STEP_SECONDS

STEPS = [
    {"step": 1, GRAD_NORM: 0.25, SCORE_MEAN: 0.1, STEP_SECONDS: 3.2, MAX_MEMORY_ALLOCATED_GB: 1.1},
    {"step": 2, GRAD_NORM: 0.5, SCORE_MEAN: 0.2, STEP_SECONDS: 2.9, MAX_MEMORY_ALLOCATED_GB: 1.2},
]
EVENTS = [
    {"event": "initialized", "weight_checksum": None},
    {"event": "update_weights", "weight_version": 0, "weight_checksum": "aaa"},
    {"event": "sleep", "weight_checksum": None},
    {"event": "update_weights", "weight_version": 1, "weight_checksum": "bbb"},
]


def changed(steps, step, name, value):
    return [dict(record, **{name: value}) if record["step"] == step else dict(record) for record in steps]


def test_equal_runs_are_equal_whatever_their_timings():
    other = changed(changed(STEPS, 1, STEP_SECONDS, 9.0), 2, MAX_MEMORY_ALLOCATED_GB, 7.0)
    comparison = compare_runs(STEPS, other, weight_pushes(EVENTS), weight_pushes(EVENTS))
    assert comparison.equal, comparison.report()
    assert comparison.compared_values == 4 and comparison.compared_checksums == 2


def test_a_changed_metric_is_reported_with_its_step():
    comparison = compare_runs(STEPS, changed(STEPS, 2, GRAD_NORM, 0.5000001))
    assert not comparison.equal
    (difference,) = comparison.differences
    assert (difference.what, difference.step, difference.a, difference.b) == (GRAD_NORM, 2, 0.5, 0.5000001)
    assert f"{GRAD_NORM} at step 2" in comparison.report()


def test_tolerances_apply_per_metric():
    other = changed(STEPS, 2, GRAD_NORM, 0.5000001)
    assert compare_runs(STEPS, other, tolerance=Tolerance(relative=1e-6)).equal
    assert not compare_runs(STEPS, other, tolerances={GRAD_NORM: EXACT}, tolerance=Tolerance(relative=1)).equal
    assert compare_runs(STEPS, other, tolerances={GRAD_NORM: Tolerance(absolute=1e-6)}).equal


def test_missing_metrics_and_steps_are_differences_unless_ignored():
    other = [dict(record, **{"staleness/lag": 0.0}) for record in STEPS[:1]]
    comparison = compare_runs(STEPS, other)
    assert {(d.what, d.step) for d in comparison.differences} == {("staleness/lag", 1), ("step", 2)}
    assert compare_runs(STEPS, other, ignore=("staleness/",), steps=[1]).equal


def test_checksums_are_compared_per_pushed_version():
    other_events = [dict(event) for event in EVENTS]
    other_events[3]["weight_checksum"] = "ccc"
    comparison = compare_runs(STEPS, STEPS, weight_pushes(EVENTS), weight_pushes(other_events))
    assert [(d.what, d.step) for d in comparison.differences] == [("weight_checksum", 1)]
    assert compare_runs(STEPS, STEPS, weight_pushes(EVENTS), weight_pushes(other_events), compare_checksums=False).equal
    # a resumed run pushes only later versions: by default the versions both pushed are compared ...
    resumed = weight_pushes(EVENTS)[1:]
    assert compare_runs(STEPS, STEPS, weight_pushes(EVENTS), resumed).compared_checksums == 1
    # ... and a version named in ``versions`` that one run did not push is a difference
    assert not compare_runs(STEPS, STEPS, weight_pushes(EVENTS), resumed, versions=[0, 1]).equal


def test_nan_equals_nan_and_non_numbers_compare_by_equality():
    nan_steps = changed(STEPS, 1, GRAD_NORM, float("nan"))
    assert compare_runs(nan_steps, nan_steps).equal
    assert not compare_runs(STEPS, nan_steps).equal
    assert not compare_runs(changed(STEPS, 1, "note", "a"), changed(STEPS, 1, "note", "b")).equal


def test_reduction_order_bounds_a_split_batch_on_the_tiny_model(tiny_assets):
    """What a second rank changes in one step: the gradient of a batch computed in two halves and added
    (FSDP's all-reduce at world size 2) against the whole batch at once, in float32 on the tiny model."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_assets / "model"), dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (32, 24), generator=generator)
    mask = torch.ones(32, 23)
    mask[:, :10] = 0
    advantages = torch.randn(32, generator=generator)

    def loss_and_gradient(row_groups):
        model.zero_grad()
        total = 0.0
        for rows in row_groups:
            logits = model(input_ids=ids[rows]).logits[:, :-1]
            log_probs = torch.log_softmax(logits, -1).gather(-1, ids[rows][:, 1:, None]).squeeze(-1)
            loss = -(log_probs * advantages[rows, None] * mask[rows]).sum() / mask.sum()
            loss.backward()
            total += loss.item()
        return total, torch.cat([p.grad.flatten() for p in model.parameters()])

    everything = list(range(32))
    whole_loss, whole = loss_and_gradient([everything])
    split_loss, split = loss_and_gradient([everything[:16], everything[16:]])
    assert REDUCTION_ORDER.allows(whole_loss, split_loss)
    assert REDUCTION_ORDER.allows(whole.norm().item(), split.norm().item())
    largest = (split - whole).abs().max().item() / whole.abs().max().item()
    print(f"split batch: loss {abs(split_loss - whole_loss):.1e}, gradient entries {largest:.1e} of the largest")
    assert largest < REDUCTION_ORDER.relative
