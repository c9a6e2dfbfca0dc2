"""Run names: one format, safe in file names and Hydra values, one name per distinct run."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_ext.algorithms.presets import ALGORITHMS, parse_algorithm
from verl_ext.runs.names import SAFE, check_name, run_name
from verl_ext.staleness.setting import OFFLINE, Setting, parse_setting


def test_the_format_with_every_part_and_with_none():
    enlarged = parse_algorithm("rec_oneside_nois@0.6_2.0")
    assert run_name(enlarged, parse_setting("sync_interval_20"), learning_rate=2e-6) == (
        "rec_oneside_nois@0.6_2-lr2e-06-sync_interval_20")
    assert run_name(parse_algorithm("offpolicy_grpo"), parse_setting("sync_interval_10"), zero_variance_masking=True) == (
        "offpolicy_grpo-zvm-sync_interval_10")
    assert run_name(parse_algorithm("reinforce"), OFFLINE, learning_rate=0.001, steps=25, prompts_per_step=8, seed=3) == (
        "rec_reinforce-lr0.001-offline-T25-P8-seed3")
    assert run_name(parse_algorithm("grpo"), Setting()) == "grpo-on_policy"


algorithms = st.sampled_from(sorted(ALGORITHMS)).map(parse_algorithm) | st.sampled_from(
    ["rec_oneside_nois@0.6_2", "rec_gspo_is@0.0006_0.0008", "grpo@0.3_0.28"]).map(parse_algorithm)
stalenesses = st.sampled_from(["on_policy", "offline", "mixed"]).map(parse_setting) | st.builds(
    Setting, st.integers(1, 99), st.integers(0, 99))


@settings(max_examples=100, deadline=None)
@given(
    first=st.tuples(algorithms, stalenesses, st.sampled_from([None, 1e-6, 2e-6, 1e-3]), st.booleans(),
                    st.none() | st.integers(1, 500), st.none() | st.integers(1, 64), st.none() | st.integers(0, 2**31 - 1)),
    second=st.tuples(algorithms, stalenesses, st.sampled_from([None, 1e-6, 2e-6, 1e-3]), st.booleans(),
                     st.none() | st.integers(1, 500), st.none() | st.integers(1, 64), st.none() | st.integers(0, 2**31 - 1)),
)
def test_names_are_safe_and_distinct_runs_get_distinct_names(first, second):
    def name(parts):
        algorithm, setting, lr, zvm, steps, prompts, seed = parts
        return run_name(algorithm, setting, lr, zvm, steps, prompts, seed)

    assert SAFE.match(name(first)) and SAFE.match(name(second))
    key = lambda parts: (parts[0].label, parts[1].label, *parts[2:])  # noqa: E731
    assert (name(first) == name(second)) == (key(first) == key(second))


@pytest.mark.parametrize("bad", ["a b", "a/b", "x;rm", "", "é", "a,b"])
def test_check_name_refuses_what_would_break_a_path_or_an_override(bad):
    with pytest.raises(ValueError, match=r"EXPERIMENT_NAME=.*use letters, digits and _ \. @ \+ = - only"):
        check_name(bad, "EXPERIMENT_NAME")
    assert check_name("rec_oneside_nois@0.6_2-lr1e-06-sync_interval_20", "EXPERIMENT_NAME")


def test_numbers_that_differ_beyond_six_digits_get_different_names():
    from verl_ext.algorithms.presets import number_label

    assert number_label(2.0) == "2" and number_label(6e-4) == "0.0006" and number_label(2e-6) == "2e-06"
    assert number_label(1e-6) != number_label(1.0000001e-6)
    assert float(number_label(1.0000001e-6)) == 1.0000001e-6
