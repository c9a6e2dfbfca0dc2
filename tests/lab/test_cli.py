"""``verl-ext lab``'s options, and its whole output path (table, PNG, JSON last line) on runs already logged."""

import json

import pytest

from tests.lab.synthetic import step_records, write_jsonl
from verl_ext.lab.cli import build_parser, lab_main, parse_seeds, resolve_runs
from verl_ext.staleness.setting import OFFLINE, parse_setting
from verl_ext.experiments.catalogue import FINDINGS as GRIDS
from verl_ext.experiments.catalogue import SYNC_INTERVAL_20, SYNC_OFFSET_10
from verl_ext.lab.runner import LabPaths, assets_fingerprint, last_reward, logged_training_steps


def runs_of(*argv):
    return resolve_runs(build_parser().parse_args(list(argv)))


def test_seeds_are_a_count_or_a_list():
    assert parse_seeds("3") == [0, 1, 2]
    assert parse_seeds("0,4") == [0, 4]
    assert parse_seeds("5,") == [5]
    for bad in ("0", "a", "1,1", "-1,"):
        with pytest.raises(Exception, match="--seeds"):
            parse_seeds(bad)


def test_no_arguments_is_the_headline_grid():
    name, title, runs = runs_of()
    grid = GRIDS["headline"]
    assert name == "headline" and title.startswith("headline: ")
    assert [run.algorithm.label for run in runs] == ["rec_reinforce", "rec_oneside_nois"]
    assert {run.steps for run in runs} == {grid.steps} and {run.setting for run in runs} == {SYNC_INTERVAL_20}


def test_every_grid_has_its_findings_settings():
    assert {point.setting for point in GRIDS["clipping"].points} == {SYNC_INTERVAL_20, SYNC_OFFSET_10}
    assert {point.setting for point in GRIDS["offline"].points} == {OFFLINE}
    epsilon = runs_of("--grid", "epsilon", "--seeds", "1", "--steps", "7", "--lr", "0.004")[2]
    assert {(run.algorithm.label, run.learning_rate) for run in epsilon} == {
        ("rec_oneside_nois", 0.004), ("rec_oneside_nois@0.6_2", 0.004), ("grpo", 0.008)}
    assert {run.steps for run in epsilon} == {7}


def test_custom_runs_take_the_options():
    name, _, runs = runs_of("--algorithms", "reinforce,rec_oneside_is", "--sync-interval", "4", "--sync-offset", "2",
                            "--seeds", "0,3", "--steps", "9", "--epsilon-low", "0.3", "--epsilon-high", "0.5",
                            "--override", "actor_rollout_ref.rollout.n=8")
    assert name == "custom"
    assert [(run.algorithm.label, run.seed) for run in runs] == [
        ("rec_reinforce", 0), ("rec_reinforce", 3), ("rec_oneside_is@0.3_0.5", 0), ("rec_oneside_is@0.3_0.5", 3)]
    assert {(run.setting.sync_interval, run.setting.sync_offset, run.steps) for run in runs} == {(4, 2, 9)}
    assert all(run.overrides[-1] == "actor_rollout_ref.rollout.n=8" for run in runs)
    offline = runs_of("--algorithms", "rec_oneside_nois", "--offline")[2]
    assert offline[0].setting == OFFLINE


def test_settings_by_name_are_the_run_scripts_names_and_aliases_resolve():
    """--settings takes the run scripts' names (and the alias mixed); --algorithms the presets (and reinforce)."""
    title, runs = runs_of("--algorithms", "reinforce,rec_oneside_nois@0.6_2.0", "--settings", "sync_interval_20,mixed,offline")[1:]
    assert title == "rec_reinforce, rec_oneside_nois@0.6_2 (sync_interval_20, sync_interval_16_offset_8, offline)"
    assert [(run.algorithm.label, run.setting) for run in runs] == [
        (algorithm, setting)
        for setting in (SYNC_INTERVAL_20, parse_setting("sync_interval_16_offset_8"), OFFLINE)
        for algorithm in ("rec_reinforce", "rec_oneside_nois@0.6_2")
    ]
    assert runs_of("--algorithms", "rec_reinforce")[2] == runs_of("--algorithms", "reinforce")[2]
    assert runs_of("--settings", "sync_offset_3")[2] == runs_of("--sync-offset", "3")[2]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--grid", "clipping", "--algorithms", "reinforce"], "--grid fixes the algorithms"),
        (["--grid", "nope"], "unknown grid 'nope'"),
        (["--algorithms", "ppo"], "--algorithms: unknown algorithm 'ppo'; allowed: rec_reinforce,"),
        (["--offline", "--sync-interval", "3"], "--offline never pushes weights"),
        (["--settings", "on_policy", "--sync-interval", "3"], "--settings names the settings: do not combine"),
        (["--settings", "m=20,n=0"], "--settings: unknown setting 'm=20'; allowed: on_policy, sync_interval_M"),
        (["--settings", "offline,offline"], "--settings: settings: offline given twice"),
        (["--grid", "clipping", "--settings", "offline"], "--grid fixes the algorithms"),
        (["--override", "no_equals_sign"], "write KEY=VALUE"),
        (["--steps", "0"], "argument --steps: expected an integer >= 1, got 0"),
        (["--sync-offset", "-1"], "argument --sync-offset: expected an integer >= 0, got -1"),
        (["--lr", "0"], "argument --lr: expected a number > 0, got 0.0"),
        (["--lr", "fast"], "argument --lr: expected a number > 0, got 'fast'"),
        (["--target", "1.5"], "--target must be in (0, 1]"),
    ],
)
def test_bad_options_stop_before_anything_runs(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        lab_main(argv + ["--dry-run"])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_dry_run_prints_each_run_and_its_overrides(capsys):
    assert lab_main(["--algorithms", "reinforce", "--sync-offset", "3", "--steps", "5", "--dry-run"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("rec_reinforce-lr0.001-sync_offset_3-T5-seed0 (5 steps): data.train_batch_size=16 ")
    assert "algorithm.adv_estimator=rec " in line
    assert "trainer.v1.delayed_sync.sync_offset=3" in line and "actor_rollout_ref.actor.use_kl_loss=true" in line


def test_the_default_headline_runs_a_smaller_batch_named_in_the_run(capsys):
    assert lab_main(["--dry-run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(" ")[0] for line in lines] == ["rec_reinforce-lr0.001-sync_interval_20-T25-P8-seed0",
                                                    "rec_oneside_nois-lr0.001-sync_interval_20-T25-P8-seed0"]
    for line in lines:
        assert "data.train_batch_size=8 " in line and "actor_rollout_ref.rollout.n=8 " in line
        assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64 " in line


def test_the_progress_counts_complete_lines_only(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", step_records([0.25, 0.5]))
    with path.open("ab") as handle:
        handle.write(b'{"step": 3, "data": {"critic/score/mean": 0.9')  # being written
    assert logged_training_steps(path) == 2 and last_reward(path) == 0.5
    assert logged_training_steps(tmp_path / "absent.jsonl") == 0 and last_reward(tmp_path / "absent.jsonl") is None


def test_a_lab_of_runs_already_logged_prints_the_table_the_png_and_json_last(tmp_path, lab_assets, capsys):
    """--reuse: runs whose logs are complete with the same overrides are not started; everything else is real."""
    out = tmp_path / "lab"
    argv = ["--algorithms", "reinforce,rec_oneside_nois", "--sync-interval", "20", "--steps", "10", "--seeds", "2",
            "--out", str(out), "--assets", str(lab_assets), "--initial-model", "random", "--reuse", "--json"]
    runs = runs_of(*argv)[2]
    paths = LabPaths(out.resolve())
    curves = {"rec_reinforce": [0.1, 0.3, 0.6, 0.2, 0.0] * 2, "rec_oneside_nois": [0.2, 0.5, 0.9, 1.0, 1.0, 1.0, 0.95, 1.0, 1.0, 1.0]}
    for run in runs:
        write_jsonl(paths.metrics(run), step_records(curves[run.algorithm.label], kl=[0.1] * 10, lag=list(range(10))))
        paths.run_description(run).parent.mkdir(parents=True, exist_ok=True)
        paths.run_description(run).write_text(
            json.dumps({"steps": run.steps, "overrides": list(run.overrides), "assets": assets_fingerprint(lab_assets)}))
    assert lab_main(argv) == 0
    output = capsys.readouterr().out
    records = json.loads(output.strip().splitlines()[-1])
    assert [(r["algorithm"], r["seed"]) for r in records] == [
        ("rec_reinforce", 0), ("rec_reinforce", 1), ("rec_oneside_nois", 0), ("rec_oneside_nois", 1)]
    assert [r["final_reward"] for r in records] == [0.0, 0.0, 1.0, 1.0]
    assert [r["steps_to_target"] for r in records] == [None, None, 7, 7]
    assert all(r["sync_interval"] == 20 and r["sync_offset"] == 0 and r["offline"] is False for r in records)
    assert "never" in output and "1.00 ± 0.00" in output
    assert (out / "custom.png").stat().st_size > 10_000
    assert json.loads((out / "custom.json").read_text()) == records
    assert "| sync_interval_20 | rec_oneside_nois | 0.001 | 2 | 1.00 ± 0.00 |" in (out / "custom.md").read_text()
    assert not (out / "lab.log").exists()  # nothing was run
