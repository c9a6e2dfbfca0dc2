"""The launcher's arguments and environment variables (what bash run_scripts/... passes on): parsing always
ends, an option without its value or an argument that is not a Hydra override is refused (exit 2) before
anything runs, and huge or malformed numbers are named, not overflowed."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.experiments.test_launch import launch
from verl_ext.experiments.__main__ import SWEEP_OPTIONS, UsageError, parse_sweep_options
from verl_ext.experiments.environment import EnvironmentValueError, read_environment


@pytest.mark.parametrize("option", SWEEP_OPTIONS)
@pytest.mark.parametrize("position", ["last", "before another option", "empty"])
def test_a_sweep_option_without_its_value_is_an_error(tmp_path, capsys, option, position):
    args = {"last": ["--algorithms", "grpo", option] if option != "--algorithms" else [option],
            "before another option": [option, "--settings" if option != "--settings" else "--project", "x"],
            "empty": [f"{option}="]}[position]
    status, recorder = launch(tmp_path, ["sweep", "gsm8k", *args])
    assert status == 2
    err = capsys.readouterr().err
    assert f"error: sweep: option {option} needs a value" in err and "usage: sweep PROFILE" in err
    assert recorder.calls == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*SWEEP_OPTIONS, "--algorithms=grpo", "--settings=", "grpo", "a=1", "~b", "-x", "--", ""]),
                max_size=8))
def test_sweep_parsing_ends_with_a_grid_or_a_usage_error(arguments):
    """Every turn of the loop consumes an argument (a bash version once looped forever on a missing value)."""
    try:
        profile, options, overrides = parse_sweep_options(["gsm8k", *arguments])
    except UsageError as error:
        assert "sweep" in str(error) or "override" in str(error)
        return
    assert profile == "gsm8k" and options["--algorithms"] and all(not item.startswith("-") for item in overrides)


def test_sweep_options_take_the_equals_form_and_unknown_ones_are_named(tmp_path, capsys):
    assert parse_sweep_options(["gsm8k", "--algorithms=grpo", "--settings=offline"]) == (
        "gsm8k", {"--algorithms": "grpo", "--settings": "offline"}, [])
    status, _ = launch(tmp_path, ["sweep", "gsm8k", "--algorithm", "grpo"])
    assert status == 2 and "unknown option --algorithm (allowed: --algorithms" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ("run", "gsm8k", "grpo", "on_policy", "--help"),
    ("run", "gsm8k", "grpo", "sync_interval_4", "trainer.total_training_steps"),
    ("figure", "gsm8k-figure4", "--steps", "3"),
    ("sweep", "gsm8k", "--algorithms", "grpo", "data.seed"),
    ("figure", "gsm8k-figure4", "=3"),
])
def test_an_extra_argument_that_is_not_an_override_stops_the_command(tmp_path, capsys, argv):
    for mode in ({}, {"VERL_EXT_DRY_RUN": "1"}):
        status, recorder = launch(tmp_path, list(argv), **mode)
        assert status == 2
        assert "Hydra override" in capsys.readouterr().err
        assert recorder.calls == []


@pytest.mark.parametrize("argv, env, message", [
    (("gsm8k", "grpo", "sync_interval_" + "9" * 25), {}, "unknown setting"),
    (("gsm8k", "grpo", "sync_offset_1234567890"), {}, "(M >= 1, N >= 0, at most 9 digits"),
    (("gsm8k", "grpo"), {"N_GPUS_PER_NODE": "9" * 20}, "N_GPUS_PER_NODE='" + "9" * 20 + "' must be an integer >= 1"),
    (("gsm8k", "grpo"), {"NNODES": "-1"}, "NNODES='-1' must be an integer >= 1"),
    (("gsm8k", "rec_oneside_nois@nan_0.2"), {}, "epsilon_low must be in [0, 1]"),
    (("gsm8k", "grpo"), {"TOTAL_STEPS": "0"}, "TOTAL_STEPS='0' must be an integer >= 1"),
    (("gsm8k", "grpo"), {"DATA_DIR": "/tmp/a${b}"}, "DATA_DIR='/tmp/a${b}' contains '${'"),
    (("gsm8k", "grpo"), {"EXPERIMENT_NAME": "a/b"}, "EXPERIMENT_NAME='a/b': use letters, digits"),
    (("gsm8k", "grpo"), {"VERL_EXT_CPU_SMOKE": "1", "VERL_EXT_GPU_SMOKE": "1"}, "exclude each other"),
    (("gsm8k", "grpo"), {"VERL_EXT_DRY_RUN": "yes"}, "VERL_EXT_DRY_RUN='yes' must be 0 or 1"),
    (("gsm8k", "grpo"), {"LOGGER": "console;rm"}, "LOGGER='console;rm': 'console;rm' is not a logger of verl's"),
])
def test_bad_numbers_and_variables_are_named(tmp_path, capsys, argv, env, message):
    status, recorder = launch(tmp_path, ["run", *argv], **env)
    assert status == 2 and message in capsys.readouterr().err
    assert recorder.calls == []


@given(st.text(max_size=12))
def test_a_count_variable_is_a_whole_number_or_an_error_naming_it(text):
    try:
        environment = read_environment({"NNODES": text})
    except EnvironmentValueError as error:
        assert str(error).startswith(f"NNODES={text!r}")
        return
    assert environment.nnodes == (int(text) if text else 1) and environment.nnodes >= 1
