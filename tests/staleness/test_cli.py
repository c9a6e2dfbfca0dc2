"""``verl-ext schedule`` (schedule_main): the JSON rows are the schedule's, the table shows them."""

import json

import pytest

from verl_ext.staleness.cli import schedule_main
from verl_ext.staleness.schedule import StalenessSchedule


def run_json(capsys, *args: str) -> list[dict]:
    assert schedule_main([*args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("m,n", [(1, 0), (3, 1), (4, 0), (1, 4), (20, 10)])
def test_json_rows_are_the_schedule(capsys, m, n):
    rows = run_json(capsys, "--sync-interval", str(m), "--sync-offset", str(n), "--steps", "25")
    schedule = StalenessSchedule(sync_interval=m, sync_offset=n)
    assert len(rows) == 25
    for step, row in enumerate(rows):
        assert set(row) == {"step", "behaviour_version", "lag", "synced"}
        assert row == {
            "step": step,
            "behaviour_version": schedule.behaviour_version(step),
            "lag": schedule.lag(step),
            "synced": schedule.synced_after(step),
        }


def test_offline_flag(capsys):
    rows = run_json(capsys, "--steps", "6", "--offline")
    assert [row["behaviour_version"] for row in rows] == [0] * 6
    assert [row["lag"] for row in rows] == list(range(6))
    assert not any(row["synced"] for row in rows)


def test_table_lists_every_step_and_the_push_count(capsys):
    assert schedule_main(["--sync-interval", "3", "--sync-offset", "1", "--steps", "7"]) == 0
    out = capsys.readouterr().out
    for header in ("step", "behaviour_version", "lag", "synced"):
        assert header in out
    schedule = StalenessSchedule(sync_interval=3, sync_offset=1)
    assert out.count("yes") == schedule.sync_count(7)
    assert f"{schedule.sync_count(7)} weight pushes" in out


@pytest.mark.parametrize(
    "args",
    [
        ["--sync-interval", "0", "--steps", "3"],
        ["--sync-offset", "-1", "--steps", "3"],
        ["--steps", "-3"],
        ["--sync-interval", "2"],
        ["--steps", "3", "--format", "yaml"],
        # offline ignores both: giving one is a contradiction, not silently dropped
        ["--steps", "3", "--offline", "--sync-interval", "3"],
        ["--steps", "3", "--offline", "--sync-offset", "2"],
        # JSON lists every row: capped, with the reason
        ["--steps", "100001", "--format", "json"],
        ["--steps", "1e7"],
        ["--steps", "nan"],
        ["--sync-interval", "inf", "--steps", "3"],
    ],
)
def test_invalid_arguments_exit_with_usage_error(capsys, args):
    with pytest.raises(SystemExit) as exit_info:
        schedule_main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "error:" in err and "Traceback" not in err


@pytest.mark.parametrize("steps", [10**7, 10**30])
def test_the_table_of_any_run_length_is_bounded(capsys, monkeypatch, steps):
    """verl-ext schedule --steps 10000000 once built every row (MemoryError at 1e9): the table shows the first
    rows and the closed-form summary; the work does not grow with --steps (counted: the rows the schedule computes,
    its per-step arithmetic called at most a few times per row shown, whatever the run length)."""
    from verl_ext.staleness.cli import TABLE_ROWS

    calls = {"_version": 0, "_synced": 0}
    for name in calls:
        original = getattr(StalenessSchedule, name)

        def counted(self, step, _original=original, _name=name):
            calls[_name] += 1
            return _original(self, step)

        monkeypatch.setattr(StalenessSchedule, name, counted)
    assert schedule_main(["--sync-interval", "20", "--sync-offset", "10", "--steps", str(steps)]) == 0
    assert 0 < calls["_version"] <= 3 * TABLE_ROWS and 0 < calls["_synced"] <= 3 * TABLE_ROWS, calls
    out = " ".join(capsys.readouterr().out.split())  # rich wraps lines at the terminal's width
    schedule = StalenessSchedule(20, 10)
    assert f"steps {TABLE_ROWS}..{steps - 1} not shown" in out
    assert f"{schedule.sync_count(steps)} weight pushes" in out and "lag 0..29" in out
    assert "at most 30 generated batches" in out


def test_json_streams_up_to_the_cap(capsys):
    rows = run_json(capsys, "--sync-interval", "4", "--steps", "20000")
    assert len(rows) == 20000 and rows[-1] == {"step": 19999, "behaviour_version": 19996, "lag": 3, "synced": True}


@pytest.mark.parametrize("mini_batches, epochs", [(2, 2), (4, 1), (1, 3)])
def test_update_lags_in_json(capsys, mini_batches, epochs):
    """--mini-batches/--epochs add the step's first and last optimizer update counted from the behaviour policy:
    U k and U k + U - 1 for a batch k steps old, U = M x E (verl_ext.staleness.update_lag)."""
    from verl_ext.staleness.update_lag import scheduled_update_lag

    rows = run_json(capsys, "--sync-interval", "3", "--sync-offset", "1", "--steps", "10",
                    "--mini-batches", str(mini_batches), "--epochs", str(epochs))
    updates = mini_batches * epochs
    for row in rows:
        lag = scheduled_update_lag(row["lag"], mini_batches, epochs)
        assert (row["update_lag_first"], row["update_lag_last"]) == (lag.first, lag.last)
        assert (lag.first, lag.last) == (updates * row["lag"], updates * row["lag"] + updates - 1)


def test_update_lags_in_the_table(capsys):
    assert schedule_main(["--sync-interval", "3", "--sync-offset", "1", "--steps", "7", "--mini-batches", "2",
                          "--epochs", "2"]) == 0
    out = capsys.readouterr().out
    assert "update lag" in out and "12..15" in out  # step 5: lag 3, updates 12..15
    assert "4 optimizer update(s) per step" in out and "0..15" in out


@pytest.mark.parametrize("args", [["--mini-batches", "0"], ["--epochs", "-1"], ["--epochs", "1.5"]])
def test_bad_update_counts_exit_with_usage_error(capsys, args):
    with pytest.raises(SystemExit) as exit_info:
        schedule_main(["--steps", "3", *args])
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
