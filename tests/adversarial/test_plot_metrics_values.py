"""Metric values and steps ``verl-ext plot`` cannot draw as they are (issue 41): a step whose metric is not a number is
counted and reported, never dropped without a word; a value near the float limit is an error naming the file and the
metric; a step beyond a float (``10**400``, valid JSON) is an error naming the file and the line -- ``verl-ext plot:
error:``, exit 2, never a traceback. The metrics reader (:mod:`verl_ext.metrics_file`) is the one home of the step rule.
"""

import json

import pytest

from verl_ext.metrics_file import MAX_STEP, MetricsFileError, read_metrics_file
from verl_ext.plotting import plot_main

REWARD = "critic/score/mean"


def metrics(tmp_path, records, name="a.jsonl"):
    folder = tmp_path / "runs"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(json.dumps({"step": step, "data": data}) + "\n" for step, data in records))
    return folder


def test_values_that_are_not_numbers_are_counted_and_reported(tmp_path, capsys):
    runs = metrics(tmp_path, [(1, {REWARD: 0.5}), (2, {REWARD: None}), (3, {REWARD: "x"}), (4, {REWARD: 0.7})])
    assert plot_main([str(runs), "--out", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    assert "left out 2 value(s) that are not numbers" in out, out
    assert f"{REWARD} at step 2: null" in out and f"{REWARD} at step 3: 'x'" in out, out
    assert (tmp_path / "plots" / "runs.png").is_file()
    read = read_metrics_file(runs / "a.jsonl")
    assert read.not_numbers() == {REWARD: [(2, None), (3, "x")]}
    assert read.series()[REWARD] == {1: 0.5, 4: 0.7}


def test_a_run_without_such_values_says_nothing_of_them(tmp_path, capsys):
    runs = metrics(tmp_path, [(1, {REWARD: 0.5}), (2, {REWARD: 0.6})])
    assert plot_main([str(runs), "--out", str(tmp_path / "plots")]) == 0
    assert "not numbers" not in capsys.readouterr().out


@pytest.mark.parametrize("value", [1.7e308, -1.7e308, 1e301])
def test_a_value_near_the_float_limit_is_an_error_naming_file_and_metric(tmp_path, capsys, value):
    runs = metrics(tmp_path, [(1, {REWARD: value}), (2, {REWARD: value}), (3, {REWARD: 0.1})])
    assert plot_main([str(runs), "--out", str(tmp_path / "plots")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("verl-ext plot: error:") and "Traceback" not in err, err
    assert str(runs / "a.jsonl") in err and f"metric '{REWARD}' at step 1" in err, err
    assert not (tmp_path / "plots" / "runs.png").exists()


@pytest.mark.parametrize("step", [10**400, -(10**400), MAX_STEP + 1])
def test_a_step_beyond_a_float_is_an_error_naming_file_and_line(tmp_path, capsys, step):
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "a.jsonl").write_text(f'{{"step": 1, "data": {{"{REWARD}": 0.5}}}}\n'
                                    f'{{"step": {step}, "data": {{"{REWARD}": 0.5}}}}\n')
    assert plot_main([str(folder), "--out", str(tmp_path / "plots")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("verl-ext plot: error:") and "Traceback" not in err, err
    assert f"{folder / 'a.jsonl'}, line 2, field 'step'" in err and "beyond the" in err, err
    with pytest.raises(MetricsFileError, match="line 2, field 'step'"):
        read_metrics_file(folder / "a.jsonl")


def test_the_largest_exact_step_is_read(tmp_path):
    runs = metrics(tmp_path, [(MAX_STEP, {REWARD: 0.5})])
    assert read_metrics_file(runs / "a.jsonl").steps[0]["step"] == MAX_STEP
