"""Hostile command lines and input files for verl-ext's commands: each gets ``error: ...`` and exit 2, never a
traceback, a hang or a run of unbounded length. In-process (no subprocess start-up)."""

import json

import pytest

from verl_ext.lab.cli import MAX_SEEDS, lab_main
from verl_ext.plotting import plot_main
from verl_ext.preflight import main as preflight_main
from verl_ext.staleness.cli import schedule_main
from tests.cost import LINEAR, cost_ratio


def exits_with_usage_error(capsys, command, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        command(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("argv,message", [
    (["--steps", "-5"], "expected an integer >= 0"),
    (["--steps", "nan"], "expected an integer >= 0, got 'nan'"),
    (["--steps", "9" * 5000], "expected an integer >= 0"),  # beyond Python's int-parsing digit limit
    (["--steps", "3", "--sync-interval=-inf"], "expected an integer >= 1"),
    (["--steps", "3", "--sync-offset", "1.5"], "expected an integer >= 0"),
    (["--steps", "3", "--offline", "--sync-offset", "7"], "would be silently ignored"),
    (["--steps", str(10**12), "--format", "json"], "lists at most 100000 steps"),
])
def test_schedule(capsys, argv, message):
    assert message in exits_with_usage_error(capsys, schedule_main, argv)


@pytest.mark.parametrize("argv,message", [
    (["--seeds", str(MAX_SEEDS + 1)], f"a count must be in 1..{MAX_SEEDS}"),
    (["--seeds", "9" * 30], f"a count must be in 1..{MAX_SEEDS}"),  # once list(range(10**30)): MemoryError
    (["--seeds", "9" * 5000], "a count (3) or a comma-separated list"),
    (["--seeds", "0,-1"], "distinct seeds in 0..2147483647"),
    (["--seeds", "1,1"], "distinct seeds"),
    (["--seeds", f"0,{2**40}"], "distinct seeds in 0..2147483647"),
    (["--seeds", "nan"], "a count (3) or a comma-separated list"),
    (["--steps", "0"], "expected an integer >= 1"),
    (["--lr", "nan"], "expected a number > 0"),
    (["--lr", "inf"], "expected a number > 0"),
    (["--target", "nan"], "--target must be in (0, 1]"),
    (["--algorithms", "rec_oneside_nois", "--epsilon-low", "nan"], "epsilon_low must be in [0, 1]"),
    (["--algorithms", "rec_oneside_nois", "--epsilon-high", "inf"], "epsilon_high must be >= 0"),
    (["--algorithms", "rec_oneside_nois@nan_0.2"], "epsilon_low must be in [0, 1]"),
    (["--algorithms", "reinforce", "--sync-interval", "99999999999999999999", "--offline"], "--offline never pushes"),
])
def test_lab(capsys, argv, message):
    assert message in exits_with_usage_error(capsys, lab_main, [*argv, "--dry-run"])


def test_lab_dry_run_of_many_seeds_is_linear(capsys):
    """--seeds 20000 took 14 s (a quadratic check for repeated run names); the plan is now linear: its cost at 4n
    seeds over its cost at n (about 4 for linear, 16 for quadratic) tells them apart on any machine."""
    def plan(seeds: int) -> None:
        capsys.readouterr()
        assert lab_main(["--algorithms", "reinforce", "--seeds", str(seeds), "--steps", "3", "--dry-run"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) == seeds and lines[-1].startswith(f"rec_reinforce-lr0.001-on_policy-T3-seed{seeds - 1} (3 steps)")

    assert cost_ratio(plan, 2500, tries=3) < LINEAR  # 10,000 seeds at 4n


@pytest.mark.parametrize("argv,message", [
    ([], "nothing to check: pass main_ppo's arguments after --"),
    (["--name", "x", "--"], "nothing to check"),
    (["--queue", "runs.jsonl"], "unrecognized arguments: --queue"),  # the run scripts' old JSON queue: gone
])
def test_preflight_without_a_run_to_check(capsys, argv, message):
    assert message in exits_with_usage_error(capsys, preflight_main, argv)


def write_metrics(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@pytest.mark.parametrize("lines,message", [
    (["[" * 100_000 + "]" * 100_000, '{"step": 1, "data": {}}'], "line 1: not a file-logger record (nested too deeply)"),
    (['{"step": 1, "data": {"x": ' + "9" * 5000 + "}}", '{"step": 2, "data": {}}'], "line 1: not a file-logger record"),
    (['{"step": 1, "data": {"x": 1' + "0" * 400 + "}}"], "field 'data.x'"),
    (['{"step": "one", "data": {}}'], "field 'step': expected an integer"),
])
def test_plot_bad_metrics_files(capsys, tmp_path, lines, message):
    runs = tmp_path / "runs"
    runs.mkdir()
    write_metrics(runs / "a.jsonl", lines)
    assert plot_main([str(runs), "--out", str(tmp_path / "plots")]) == 2
    err = capsys.readouterr().err
    assert "verl-ext plot: error:" in err and message in err


def test_plot_bad_options(capsys, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    write_metrics(runs / "a.jsonl", [json.dumps({"step": 1, "data": {"critic/score/mean": 0.5}})])
    assert "--window must be >= 1" in exits_with_usage_error(capsys, plot_main, [str(runs), "--window", "-3"])
    assert "--panels: name at least one" in exits_with_usage_error(capsys, plot_main, [str(runs), "--panels", ","])
    assert "invalid int value" in exits_with_usage_error(capsys, plot_main, [str(runs), "--window", "nan"])
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    assert plot_main([str(runs), "--out", str(not_a_folder)]) == 2  # --out is a file
    err = capsys.readouterr().err
    assert "verl-ext plot: error:" in err and "Traceback" not in err
