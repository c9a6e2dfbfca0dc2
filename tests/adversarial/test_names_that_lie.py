"""Names that lie (issue 31, item 4): a run's name, its ``<name>.run.json`` and its plot say what the composed config
trains, or the run is refused before anything is written or started; the description records what ran; a user's
``trainer.default_local_dir`` is honoured (and checked), a user's file-logger path refused, never replaced silently.

Every case composes its config in this process (Hydra, verl's ``validate_config``; no Ray, no ``main_ppo`` run).
"""

from pathlib import Path

import pytest

from verl_ext.algorithms.presets import parse_algorithm
from verl_ext.cpu.backend import CPUBackend
from verl_ext.run_description import read_run_description, write_run_description
from verl_ext.runs.claims import describe
from verl_ext.runs.compose import compose
from verl_ext.runs.grid import Grid, points
from verl_ext.runs.outputs import Outputs
from verl_ext.runs.run import Run, RunRefused
from verl_ext.staleness.setting import parse_setting

NAME = "rec_oneside_nois-lr2e-06-sync_interval_20-seed3"


def grid_run(*overrides, algorithm="rec_oneside_nois", setting="sync_interval_20", zero_variance_masking=False):
    """The run the one planner makes of one point (learning rate 2e-6, seed 3) with the user's ``overrides``."""
    grid = Grid("g", points([parse_algorithm(algorithm)], [parse_setting(setting)]), (2e-6,), (3,),
                zero_variance_masking=zero_variance_masking)
    return grid.runs(overrides=overrides)[0]


def check(run, tmp_path, smoke=False):
    return compose(run, CPUBackend(tmp_path / "assets", smoke=smoke), Outputs(tmp_path / "out")).check()


def refusal(run, tmp_path) -> str:
    with pytest.raises(RunRefused) as refused:
        check(run, tmp_path)
    return str(refused.value)


# (override, key, what the name claims, what the config has)
LIES = {
    "sync_interval": ("trainer.v1.delayed_sync.sync_interval=1", "trainer.v1.delayed_sync.sync_interval", "20", "1"),
    "sync_offset": ("trainer.v1.delayed_sync.sync_offset=4", "trainer.v1.delayed_sync.sync_offset", "0", "4"),
    "epsilon low": ("actor_rollout_ref.actor.clip_ratio_low=0.6", "actor_rollout_ref.actor.clip_ratio_low", "0.2", "0.6"),
    "epsilon high": ("actor_rollout_ref.actor.clip_ratio_high=2", "actor_rollout_ref.actor.clip_ratio_high", "0.2", "2"),
    "loss_mode": ("actor_rollout_ref.actor.policy_loss.loss_mode=rec_oneside_is",
                  "actor_rollout_ref.actor.policy_loss.loss_mode", "'rec_oneside_nois'", "'rec_oneside_is'"),
    "estimator": ("algorithm.adv_estimator=grpo", "algorithm.adv_estimator", "'rec'", "'grpo'"),
    "learning rate": ("actor_rollout_ref.actor.optim.lr=1e-5", "actor_rollout_ref.actor.optim.lr", "2e-06", "1e-05"),
    "prompt order seed": ("data.seed=7", "data.seed", "3", "7"),
    "sampling seed": ("actor_rollout_ref.rollout.seed=7", "actor_rollout_ref.rollout.seed", "3", "7"),
    "masking": ("trainer.v1.delayed_sync.zero_variance_masking=true", "trainer.v1.delayed_sync.zero_variance_masking",
                "false", "true"),
}


@pytest.mark.parametrize("case", sorted(LIES))
def test_an_override_that_contradicts_the_name_is_refused_naming_key_values_and_override(case, tmp_path):
    override, key, claimed, actual = LIES[case]
    message = refusal(grid_run(override), tmp_path)
    assert f"run {NAME!r} refused before anything was written or started: its name says what it trains" in message
    assert f"{key}: " in message and f" says {claimed}, the composed config has {actual}; " in message, message
    assert f"set by the override {override!r} in the run's own overrides" in message, message
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_run_named_without_a_setting_claims_no_schedule_and_records_the_one_it_trains(tmp_path):
    """The quickstart's run (``grpo``, no setting) given a delayed schedule by the user's overrides trains it (the
    quickstart has no setting of its own: the schedule comes after ``--``); its description says which."""
    from verl_ext.runs.claims import SCHEDULE_KEYS, claims, recorded_values

    run = Run.from_preset("grpo", parse_algorithm("grpo"), overrides=(
        "trainer.v1.trainer_mode=delayed_sync", "trainer.v1.delayed_sync.sync_interval=20"))
    assert not {claim.key for claim in claims(run)} & {*SCHEDULE_KEYS, "trainer.v1.trainer_mode"}
    recorded = recorded_values(run, check(run, tmp_path).resolved)
    assert recorded["trainer.v1.trainer_mode"] == "delayed_sync" and recorded[SCHEDULE_KEYS[0]] == 20


def test_the_quickstart_refuses_a_lie_before_it_builds_assets(tmp_path, monkeypatch):
    from verl_ext.cpu import quickstart
    from verl_ext.tiny import assets

    monkeypatch.setattr(assets, "build_tiny_assets", lambda *a, **k: pytest.fail("the quickstart went past its check"))
    with pytest.raises(RunRefused, match="actor_rollout_ref.actor.clip_ratio_low: the algorithm rec_oneside_nois"):
        quickstart.run_quickstart(out=tmp_path / "out", assets=tmp_path / "assets",
                                  extra_overrides=["actor_rollout_ref.actor.clip_ratio_low=0.3"])
    assert not (tmp_path / "out").exists()


def test_the_lab_refuses_a_lie_in_its_check(tmp_path):
    from verl_ext.lab.runner import check_runs

    with pytest.raises(ValueError, match=r"lab run .*: bad configuration: .*trainer.v1.delayed_sync.sync_interval: "
                                         r"the setting sync_interval_20 says 20, the composed config has 1"):
        check_runs([grid_run("trainer.v1.delayed_sync.sync_interval=1")], tmp_path / "lab", tmp_path / "assets")


def test_overrides_that_agree_with_the_name_pass_and_the_description_records_what_ran(tmp_path):
    run = grid_run("trainer.v1.delayed_sync.sync_interval=20", "actor_rollout_ref.actor.optim.lr=0.000002",
                   "actor_rollout_ref.rollout.n=8")  # the claimed values restated, and a key the name does not claim
    checked = check(run, tmp_path)
    description = describe(run, checked.resolved)
    assert (description.run, description.group) == ("rec_oneside_nois-lr2e-06", "sync_interval_20")
    config = description.config
    assert config["algorithm.adv_estimator"] == "rec"
    assert config["actor_rollout_ref.actor.policy_loss.loss_mode"] == "rec_oneside_nois"
    assert (config["actor_rollout_ref.actor.clip_ratio_low"], config["actor_rollout_ref.actor.clip_ratio_high"]) == (0.2, 0.2)
    assert config["actor_rollout_ref.actor.optim.lr"] == 2e-06
    assert config["trainer.v1.trainer_mode"] == "delayed_sync" and config["trainer.v1.delayed_sync.sync_interval"] == 20
    assert config["data.seed"] == config["actor_rollout_ref.rollout.seed"] == 3
    assert config["actor_rollout_ref.rollout.n"] == 8 and config["data.train_batch_size"] == checked.resolved["data"]["train_batch_size"]
    assert config["algorithm.rollout_correction.bypass_mode"] is True  # a key the preset sets
    path = write_run_description(tmp_path / "d.run.json", description)
    assert read_run_description(path) == description  # the one writer, the one reader


def test_a_smokes_swap_is_not_a_lie_and_the_description_records_the_swapped_value(tmp_path):
    """A CPU smoke swaps in the tiny model and its learning rate over the run's overrides (docs/run-scripts.md): the
    learning-rate sweep's smoke runs, and its description records the rate that ran."""
    run = grid_run()
    checked = check(run, tmp_path, smoke=True)
    ran = checked.resolved["actor_rollout_ref"]["actor"]["optim"]["lr"]
    assert ran != 2e-06  # the smoke's own rate
    assert describe(run, checked.resolved, cpu_smoke=True).config["actor_rollout_ref.actor.optim.lr"] == ran


def test_a_users_checkpoint_folder_is_honoured_and_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = grid_run("trainer.default_local_dir=mine/checkpoints")
    composed = compose(run, CPUBackend(tmp_path / "assets"), Outputs(tmp_path / "out"))
    assert composed.paths.checkpoints == tmp_path / "mine" / "checkpoints"  # relative: from the current folder
    assert f"trainer.default_local_dir={tmp_path / 'mine' / 'checkpoints'}" in composed.overrides
    assert composed.check().resolved["trainer"]["default_local_dir"] == str(tmp_path / "mine" / "checkpoints")
    for value in ("null", "'${oc.env:HOME}'", "''"):
        with pytest.raises(RunRefused, match=r"trainer.default_local_dir: the override .* write the checkpoint folder as a path"):
            compose(grid_run(f"trainer.default_local_dir={value}"), CPUBackend(tmp_path / "assets"), Outputs(tmp_path / "out"))
    with pytest.raises(RunRefused, match="disagree: give one"):
        Outputs(tmp_path).paths(Run("r", overrides=("trainer.default_local_dir=/a",), checkpoint_dir=tmp_path / "b"))


def test_a_users_checkpoint_folder_gets_the_run_scripts_folder_check(tmp_path):
    from verl_ext.experiments.environment import read_environment
    from verl_ext.experiments.modes import LaunchStop, check_output_paths

    (tmp_path / "a-file").write_text("not a folder")
    environment = read_environment({"OUTPUT_DIR": str(tmp_path / "outputs"), "VERL_EXT_CPU_SMOKE": "1"})
    run = grid_run(f"trainer.default_local_dir={tmp_path / 'a-file'}")
    composed = compose(run, environment.backend(), environment.run_outputs())
    with pytest.raises(LaunchStop, match=f"{tmp_path / 'a-file'}: it is a file"):
        check_output_paths([composed], environment)


def test_a_users_file_logger_path_is_refused_naming_the_key_and_where_metrics_go(tmp_path):
    for key in ("+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH",
                "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_ROOT"):
        run = grid_run(f"{key}=/tmp/elsewhere")
        outputs = Outputs(tmp_path / "out")
        with pytest.raises(RunRefused) as refused:
            compose(run, CPUBackend(tmp_path / "assets"), outputs)
        message = str(refused.value)
        assert f"{key.lstrip('+')}: set by the override '{key}=/tmp/elsewhere'" in message
        assert str(outputs.paths(grid_run()).metrics) in message, message
    assert not Path(tmp_path / "out").exists()


def test_a_file_logger_path_in_the_users_environment_is_named_when_it_is_replaced(tmp_path, capsys):
    from verl_ext.runs.launch import launch
    from verl_ext.runs.monitor import RunMeasurements

    seen = {}

    def measure(command, env, log_path, metrics_path=None, **_):  # the child process, which cannot run here
        seen.update(env=env)
        return RunMeasurements(0, 1.0, 0, 0, 0.0, None, None)

    result = launch(grid_run(), CPUBackend(tmp_path / "assets"), Outputs(tmp_path / "out"), measure=measure,
                    environ={"VERL_FILE_LOGGER_PATH": "/tmp/mine.jsonl", "VERL_FILE_LOGGER_ROOT": "/tmp/root"})
    err = capsys.readouterr().err
    for name, value in (("VERL_FILE_LOGGER_PATH", "/tmp/mine.jsonl"), ("VERL_FILE_LOGGER_ROOT", "/tmp/root")):
        assert f"[verl-ext] {name}={value} in the environment is not used: run {NAME!r} writes its metrics where " \
               f"verl-ext reads them back, {result.metrics_path}" in err, err
    assert seen["env"]["VERL_FILE_LOGGER_PATH"] == str(result.metrics_path)
