"""How the lab runs its runs: checked by the dry run's checks first, then in this process with its output in the log."""

import os
import subprocess
import sys

import pytest

from verl_ext.algorithms.presets import parse_algorithm
from verl_ext.staleness.setting import parse_setting
from verl_ext.lab.plan import lab_run
from verl_ext.lab.runner import output_to, run_lab


def test_a_bad_run_stops_the_lab_naming_the_run_and_the_key_before_anything_starts(tmp_path, lab_assets):
    good = lab_run(parse_algorithm("rec_oneside_nois"), parse_setting("sync_interval_2"), steps=2)
    bad = lab_run(parse_algorithm("rec_reinforce"), parse_setting("sync_interval_2"), steps=2,
                 extra_overrides=("trainer.v1.delayed_sync.sync_offset=-1",))
    with pytest.raises(ValueError) as error:
        run_lab([good, bad], tmp_path / "lab", lab_assets, target=0.9)
    message = str(error.value)
    assert f"lab run {bad.name}: bad configuration" in message and "sync_offset" in message
    assert good.name not in message  # the good run passed the same checks
    assert not (tmp_path / "lab" / "lab.log").exists()  # nothing was started


def test_the_output_goes_to_the_log_and_the_bar_to_the_terminal(tmp_path, capfd):
    log = tmp_path / "lab.log"
    with output_to(log) as terminal:
        print("python's stdout")
        print("python's stderr", file=sys.stderr)
        os.write(1, b"file descriptor 1\n")
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('a child process\\n')"], check=True)
        terminal.write("the progress bar\n")
    print("after the block")
    text = log.read_text()
    for line in ("python's stdout", "python's stderr", "file descriptor 1", "a child process"):
        assert line in text
    out, err = capfd.readouterr()
    assert err == "the progress bar\n" and out == "after the block\n"


def test_when_ray_does_not_start_every_run_is_reported_not_run_with_the_reason_in_the_log(tmp_path, lab_assets, monkeypatch):
    """Starting Ray is the one collaborator replaced here (it fails as ``CPURaySession`` fails when Ray is already
    initialised in this process); the runner's handling is the code under test."""
    from verl_ext.cpu import ray_session

    def refuse(session):
        raise RuntimeError("CPURaySession starts its own Ray cluster; Ray is already initialised in this process")

    monkeypatch.setattr(ray_session.CPURaySession, "__enter__", refuse)
    runs = [lab_run(parse_algorithm(name), parse_setting("sync_interval_2"), steps=2) for name in ("rec_reinforce", "grpo")]
    records = run_lab(runs, tmp_path / "lab", lab_assets, target=0.9)
    log = tmp_path / "lab" / "lab.log"
    assert [record["name"] for record in records] == [run.name for run in runs]
    for record in records:
        assert record["error"] == (f"not run: RuntimeError: CPURaySession starts its own Ray cluster; Ray is already "
                                   f"initialised in this process (see {log.resolve()})")
    assert "Traceback" in log.read_text() and "Ray is already initialised" in log.read_text()


def test_a_run_is_reused_when_its_stored_overrides_set_the_same_values_in_any_order(tmp_path, lab_assets):
    """Records written by an earlier version listed the same overrides in another order: still the same run. A value
    changed, a key added or the initial model changed: run again."""
    import json

    from tests.lab.synthetic import step_records, write_jsonl
    from verl_ext.lab.runner import LabPaths, assets_fingerprint, is_reusable, same_overrides

    run = lab_run(parse_algorithm("rec_oneside_nois"), parse_setting("sync_interval_2"), steps=2)
    paths = LabPaths(tmp_path)
    write_jsonl(paths.metrics(run), step_records([0.5, 0.6]))
    fingerprint = assets_fingerprint(lab_assets)

    def stored(overrides, assets=fingerprint):
        paths.run_description(run).parent.mkdir(parents=True, exist_ok=True)
        paths.run_description(run).write_text(json.dumps({"steps": run.steps, "overrides": overrides, "assets": assets}))
        return is_reusable(run, paths, fingerprint)

    assert stored(list(reversed(run.overrides)))
    assert not stored([*run.overrides[:-1], "actor_rollout_ref.actor.optim.lr=0.5"])
    assert not stored([*run.overrides, "trainer.save_freq=3"])
    assert not stored(list(run.overrides), assets="another model")
    assert same_overrides(["a=1", "b=2", "a=3"], ["b=2", "a=3"]) and not same_overrides(["a=1"], ["a=2"])
