"""``verl-ext gpu-smoke``'s arguments and the metrics file it reads back (issue 31, class 5): bounded arguments, and
a metrics file whose schedule counters are not whole numbers is ``error: <file>: <what>`` with exit 2, never a
traceback. In-process, on the real CPU-backend run's metrics (tests/fixtures/gpu_smoke/)."""

import json
from pathlib import Path

import pytest

from verl_ext.gpu import smoke

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "tests" / "fixtures" / "gpu_smoke" / "cpu_backend_delayed_sync_3_1.jsonl"


def altered_run(tmp_path: Path, key: str, value, line: int = 4) -> Path:
    records = [json.loads(text) for text in RUN.read_text().splitlines()]
    records[line]["data"][key] = value
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))  # NaN is written as NaN
    return path


@pytest.mark.parametrize("key, value, what", [
    ("staleness/lag", "one", "staleness/lag = 'one' is not a number"),
    ("staleness/lag", None, "staleness/lag = None is not a number"),
    ("staleness/lag", float("nan"), "staleness/lag = nan is not a whole number"),
    ("staleness/lag", 1.5, "staleness/lag = 1.5 is not a whole number"),
    ("staleness/behaviour_version", float("inf"), "is not a whole number"),
    ("staleness/weight_pushes", [3], "staleness/weight_pushes = [3] is not a number"),
    ("staleness/synced", True, "staleness/synced = True is not a number"),
    ("critic/score/mean", "0.5", "critic/score/mean = '0.5' is not a number"),
    ("timing_s/step", {"s": 1}, "timing_s/step = {'s': 1} is not a number"),
])
def test_unreadable_logged_values_are_an_error_naming_file_step_and_metric(tmp_path, capsys, key, value, what):
    path = altered_run(tmp_path, key, value)
    assert smoke.main(["--metrics", str(path), "--backend", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: step " in err and what in err and "Traceback" not in err


def test_a_null_reward_is_verls_nan_a_failed_check_not_an_unreadable_file(tmp_path, capsys):
    assert smoke.main(["--metrics", str(altered_run(tmp_path, "critic/score/mean", None)), "--backend", "cpu"]) == 1
    assert "[FAIL] reward in [0, 1] at every step" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--steps", "1000000"], "expected an integer in 1..1000"),
    (["--steps", "0"], "expected an integer in 1..1000"),
    (["--tolerance", "nan"], "expected a number > 0"),
    (["--tolerance", "-1"], "expected a number > 0"),
    (["--tolerance", "inf"], "expected a number > 0"),
    (["--tolerance", "0"], "expected a number > 0"),
])
def test_bounded_arguments(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        smoke.main(["--metrics", str(RUN), "--backend", "cpu", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
