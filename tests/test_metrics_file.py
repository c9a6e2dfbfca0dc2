"""verl's metrics file has one reader (verl_ext.metrics_file) with one error policy, and every tool that reads
it -- ``verl-ext plot``, the lab's progress and run check, the smoke check, the CPU launcher -- shares it:
a bad line is an error naming the file, the line and the field; a last line cut short (no newline, not JSON)
is skipped and counted."""

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_ext import metric_names
from verl_ext.metrics_file import MetricsFileError, file_logger_path, read_metrics_file

REWARD = metric_names.SCORE_MEAN


def lines(*records) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


def training(step, reward):
    return {"step": step, "data": {REWARD: reward, metric_names.GLOBAL_STEP: step}}


CUT = '{"step": 3, "data": {"critic/score/mean": 0.9'  # a write cut short
BAD_MIDDLE = lines(training(1, 0.25)) + "not json\n" + lines(training(3, 0.5))


def test_records_of_a_step_are_merged_in_step_order_and_series_keep_numbers(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(lines(
        {"step": 2, "data": {"a": 1, "text": "x", "nan": None, "flag": True}},
        {"step": 0, "data": {"val": 0.5}},
        {"step": 2, "data": {"a": 3, "b": 2.5}},
    ) + "\n")
    metrics = read_metrics_file(path)
    assert metrics.steps == [{"step": 0, "val": 0.5}, {"step": 2, "a": 3, "text": "x", "nan": None, "flag": True, "b": 2.5}]
    assert metrics.series() == {"val": {0: 0.5}, "a": {2: 3.0}, "b": {2: 2.5}} and metrics.skipped_lines == 0


@pytest.mark.parametrize("content, message", [
    (BAD_MIDDLE, "m.jsonl, line 2: not JSON"),
    (lines(training(1, 0.1)) + "not json\n", "line 2: not JSON"),  # a complete last line is checked too
    (lines({"step": "one", "data": {}}), "line 1, field 'step': expected an integer"),
    (lines({"step": True, "data": {}}), "field 'step'"),
    (lines({"step": 1, "data": [1]}), "line 1, field 'data': expected an object"),
    (lines([1, 2]), "line 1: expected verl's file-logger record"),
    (lines({"step": 1, "data": {"step": 2}}), "field 'data.step'"),
    ('{"step": 1, "data": {"x": 1' + "0" * 400 + "}}\n", "field 'data.x': a number too large"),
    ("[" * 100_000 + "]" * 100_000 + "\n" + lines(training(1, 0.0)), "line 1: not a file-logger record (nested too deeply)"),
])
def test_a_bad_line_is_an_error_naming_file_line_and_field(tmp_path, content, message):
    path = tmp_path / "m.jsonl"
    path.write_text(content)
    with pytest.raises(MetricsFileError) as error:
        read_metrics_file(path)
    assert message in str(error.value) and str(path) in str(error.value)


def test_bytes_that_are_not_utf8_are_an_error_except_in_a_cut_last_line(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_bytes(lines(training(1, 0.5)).encode() + b'{"step": 2, "data": {"\xff": 1}}\n')
    with pytest.raises(MetricsFileError, match="line 2: not UTF-8"):
        read_metrics_file(path)
    path.write_bytes(lines(training(1, 0.5)).encode() + '{"step": 2, "data": {"é'.encode()[:-1])
    assert read_metrics_file(path).skipped_lines == 1


def test_an_unreadable_path_is_named(tmp_path):
    with pytest.raises(MetricsFileError, match="a folder, not a regular file: not the metrics file"):
        read_metrics_file(tmp_path)  # a folder


def test_file_logger_path_is_where_verl_writes():
    assert str(file_logger_path("/r", "proj", "exp")) == "/r/proj/exp.jsonl"


records = st.lists(
    st.tuples(st.integers(0, 5), st.dictionaries(st.sampled_from("abc"), st.floats(-1e6, 1e6), max_size=3)),
    min_size=1, max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(records=records, cut=st.floats(0, 1, exclude_max=True))
def test_a_file_cut_anywhere_in_its_last_record_reads_the_complete_records(tmp_path_factory, records, cut):
    """What a reader sees while verl writes: every complete record, and the partial one skipped and counted."""
    complete = lines(*({"step": step, "data": data} for step, data in records[:-1]))
    last = json.dumps({"step": records[-1][0], "data": records[-1][1]})
    path = tmp_path_factory.mktemp("cut") / "m.jsonl"
    path.write_text(complete + last[: int(cut * len(last))])
    expected = read_metrics_file(_written(path.with_name("whole.jsonl"), complete))
    metrics = read_metrics_file(path)
    assert metrics.steps == expected.steps and metrics.skipped_lines == (1 if int(cut * len(last)) else 0)


def _written(path, text):
    path.write_text(text)
    return path


# --- every caller shares the policy ------------------------------------------------------------------------

def _plot_reader(path):
    from verl_ext.plotting import load_runs

    (run,) = load_runs([path])
    return sorted(run.metrics[REWARD]), run.skipped_lines


def _lab_progress_reader(path):
    from verl_ext.lab.runner import last_reward, logged_training_steps

    return logged_training_steps(path), last_reward(path)


def _cpu_launcher_reader(path):
    from verl_ext.runs.launch import RunPaths, RunResult

    paths = RunPaths(metrics=path, checkpoints=path.parent, log=path.parent / "main_ppo.log",
                     events=path.parent / "events.jsonl", description=path.parent / "run.json", run_dir=path.parent)
    result = RunResult(run=None, paths=paths, wall_seconds=0.0)
    return [step["step"] for step in result.steps]


@pytest.mark.parametrize("reader, on_cut_file", [
    (_plot_reader, ([1, 2], 1)),
    (_lab_progress_reader, (2, 0.5)),
    (_cpu_launcher_reader, [1, 2]),
])
def test_every_reader_skips_a_cut_last_line_and_rejects_a_bad_middle_line(tmp_path, reader, on_cut_file):
    cut = tmp_path / "cut.jsonl"
    cut.write_text(lines(training(1, 0.25), training(2, 0.5)) + CUT)
    assert reader(cut) == on_cut_file
    bad = tmp_path / "bad.jsonl"
    bad.write_text(BAD_MIDDLE)
    with pytest.raises(MetricsFileError, match="bad.jsonl, line 2: not JSON"):
        reader(bad)


def test_the_lab_says_when_a_short_run_lost_its_cut_last_line(tmp_path):
    from verl_ext.lab.runner import missing_steps_error

    path = tmp_path / "cut.jsonl"
    path.write_text(lines(training(1, 0.25)) + CUT)
    metrics = read_metrics_file(path)
    message = missing_steps_error(SimpleNamespace(steps=2), metrics.steps, path, metrics.skipped_lines)
    assert message.startswith("verl logged 1 of 2 training steps") and "last line was cut short" in message


def test_the_smoke_check_of_a_metrics_file_names_a_bad_line_and_reports_a_cut_one(tmp_path, capsys):
    from verl_ext.gpu.smoke import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text(BAD_MIDDLE)
    with pytest.raises(SystemExit) as exit_info:
        main(["--metrics", str(bad), "--steps", "2"])
    assert exit_info.value.code == 2 and "bad.jsonl, line 2: not JSON" in capsys.readouterr().err
    cut = tmp_path / "cut.jsonl"
    cut.write_text(lines(training(1, 0.25), training(2, 0.5)) + CUT)
    main(["--metrics", str(cut), "--steps", "2"])  # the checks fail (no staleness metrics); the summary prints
    assert "skipped 1 last line cut short" in capsys.readouterr().out
