"""The run scripts' launcher in this process (verl_ext.experiments: script_runs, modes, __main__, through the one
launcher verl_ext.runs.launch): names checked before anything runs; the real-run path counts GPUs, checks every
run, prepares data once, writes each run's description and starts main_ppo with the run's overrides; smoke
profiles win over the script's overrides; environment variables reach the overrides. Only what starts a process or
needs a GPU is replaced (``Tools``); the configuration checks are the real ones."""

import json
import os
import sys

import pytest

from tests.run_scripts.scripts import override_value, planned_runs, script_environment
from verl_ext.experiments.__main__ import main
from verl_ext.experiments.modes import Tools
from verl_ext.runs.monitor import RunMeasurements
from verl_ext.recipe import config_dir as recipe_config_dir


class Recorder:
    """Stands in for child processes: records each command and its environment; data_prep writes empty parquet
    files as the real one would; main_ppo (the one launcher's child process) exits with ``main_ppo_status``."""

    def __init__(self, gpus: int = 8, main_ppo_status: int = 0):
        self.calls = []
        self.gpus = gpus
        self.main_ppo_status = main_ppo_status

    def run_command(self, argv, env):
        self.calls.append((list(argv), dict(env)))
        folder = argv[argv.index("--local_save_dir") + 1]
        os.makedirs(folder, exist_ok=True)
        for name in ("train.parquet", "test.parquet", "math500.parquet"):
            open(os.path.join(folder, name), "wb").close()
        return 0

    def measure(self, command, env, log_path, metrics_path=None, echo=False, timeout=None, also_measure=None):
        self.calls.append((list(command), dict(env)))
        return RunMeasurements(self.main_ppo_status, 0.0, 0, 0, 0.0, None, None)

    def tools(self, environ):
        return Tools(run_command=self.run_command, measure=self.measure, count_gpus=lambda: self.gpus, environ=environ)

    def modules(self):
        return [argv[2] for argv, _ in self.calls]


@pytest.fixture(scope="module", autouse=True)
def parse_each_yaml_file_once():
    from verl_ext import preflight

    with preflight.memoised_config_files():
        yield


def launch(tmp_path, argv, recorder=None, **env):
    recorder = recorder or Recorder()
    environ = script_environment(tmp_path, **env)
    return main(argv, environ, recorder.tools(environ)), recorder


@pytest.mark.parametrize("argv, message", [
    (["run", "gsm8k", "rec_onesided_nois"], "unknown algorithm 'rec_onesided_nois'; allowed: rec_reinforce, rec_oneside_is"),
    (["run", "gsm8k", "grpo", "sync_intervall_20"], "unknown setting 'sync_intervall_20'; allowed: on_policy, sync_interval_M"),
    (["run", "gsm8k", "grpo", "sync_interval_0"], "sync_interval"),
    (["run", "gsm8k-qwen7b", "grpo"], "unknown profile 'gsm8k-qwen7b'; allowed: gsm8k-qwen2.5-1.5b"),
    (["run", "gsm8k", "reinforce@0.6_2.0"], "'rec_reinforce' has no clipping range"),
    (["run", "gsm8k", "rec_oneside_nois@0.6"], "write the clipping range as NAME@EPS_LOW_EPS_HIGH"),
    (["run", "gsm8k"], "usage: run PROFILE ALGORITHM"),
    (["figure", "gsm8k-figure99"], "unknown figure 'gsm8k-figure99'; allowed: gsm8k-figure2"),
    (["walk", "gsm8k"], "unknown command 'walk'; allowed: run, sweep, figure, list"),
])
def test_bad_names_stop_before_anything_runs(tmp_path, capsys, argv, message):
    for mode in ({}, {"VERL_EXT_DRY_RUN": "1"}):
        status, recorder = launch(tmp_path, argv, **mode)
        assert status == 2
        assert message in capsys.readouterr().err
        assert recorder.calls == []


def test_a_bad_name_anywhere_in_a_grid_stops_it_before_its_first_run(tmp_path, capsys):
    status, recorder = launch(tmp_path, ["figure", "gsm8k-figure10"], ALGORITHMS="grpo opmd@0.2_0.2")
    assert status == 2 and "ALGORITHMS='grpo opmd@0.2_0.2'" in capsys.readouterr().err
    assert recorder.calls == []


def test_without_enough_gpus_it_says_what_to_do_and_starts_nothing(tmp_path, capsys):
    status, recorder = launch(tmp_path, ["figure", "gsm8k-figure4", "trainer.save_freq=5"], Recorder(gpus=2))
    assert status == 1
    err = capsys.readouterr().err
    for text in (
        "This run needs 8 GPU(s) per node (N_GPUS_PER_NODE=8, NNODES=1)",
        "found 2 NVIDIA GPU(s)",
        "VERL_EXT_DRY_RUN=1 bash run_scripts/gsm8k/figure4_red.sh trainer.save_freq=5",
        "VERL_EXT_CPU_SMOKE=1 bash run_scripts/gsm8k/figure4_red.sh",
        "verl-ext lab",
        "Nothing was started",
    ):
        assert text in err, text
    assert recorder.calls == []
    status, recorder = launch(tmp_path, ["run", "gsm8k", "grpo"], Recorder(gpus=0), VERL_EXT_GPU_SMOKE="1")
    assert status == 1 and "This run needs 1 GPU(s)" in capsys.readouterr().err  # the GPU smoke needs one
    assert recorder.calls == []


def test_a_real_run_checks_prepares_missing_data_once_then_calls_main_ppo(tmp_path, capsys):
    metrics = tmp_path / "outputs" / "metrics" / "math-figure11"
    metrics.mkdir(parents=True)
    (metrics / "grpo-on_policy.jsonl").write_text('{"step": 1, "data": {}}\n')  # an earlier run's log
    raw = tmp_path / "raw" / "math"
    raw.mkdir(parents=True)
    status, recorder = launch(tmp_path, ["figure", "math-figure11", "trainer.save_freq=50"], ALGORITHMS="red_weight,grpo",
                              RAW_DATA_PATH=str(raw), MODEL_PATH="/models/llama")
    assert status == 0, capsys.readouterr().err
    data_dir = tmp_path / "data" / "math"
    assert recorder.modules() == ["data_prep.math", "verl.trainer.main_ppo", "verl.trainer.main_ppo"]  # data prepared once
    assert recorder.calls[0][0][1:] == ["-m", "data_prep.math", "--local_save_dir", str(data_dir), "--local_dataset_path", str(raw)]
    for (argv, env), label in zip(recorder.calls[1:], ("red_weight", "grpo")):
        assert argv[0] == sys.executable
        args = argv[3:]
        assert args[:2] == [f"--config-path={recipe_config_dir()}", "--config-name=rec_trainer"]
        assert override_value(args, "data.val_files") == f"{data_dir}/math500.parquet"
        assert override_value(args, "actor_rollout_ref.model.path") == "/models/llama"
        assert override_value(args, "trainer.save_freq") == "50"  # the user's extra override
        assert override_value(args, "trainer.experiment_name") == f"{label}-on_policy"
        logger_path = str(metrics / f"{label}-on_policy.jsonl")
        assert env["VERL_FILE_LOGGER_PATH"] == logger_path
        assert override_value(args, "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH") == logger_path
        description = json.loads((metrics / f"{label}-on_policy.run.json").read_text())
        assert (description["run"], description["group"], description["cpu_smoke"]) == (label, "on_policy", False)
        assert (description["profile"], description["algorithm"]) == ("math-llama3.1-8b", label)
    # the earlier log was kept, not truncated by verl's file logger
    assert (metrics / "grpo-on_policy.part1.jsonl").read_text() == '{"step": 1, "data": {}}\n'
    # prepared data that the manifest does not vouch for (empty files here) is prepared again
    from verl_ext.experiments.environment import read_environment
    from verl_ext.experiments.modes import prepare_data
    from verl_ext.experiments.profiles import profile_named

    again = Recorder()
    prepare_data(profile_named("math"), read_environment(script_environment(tmp_path)), again.tools({}))
    assert again.modules() == ["data_prep.math"]


def test_a_failing_check_stops_before_data_work(tmp_path, capsys):
    status, recorder = launch(tmp_path, ["figure", "gsm8k-figure4", "data.train_batch_size=0"], ALGORITHMS="red_drop")
    assert status == 2
    err = capsys.readouterr().err
    assert "data.train_batch_size=0 is invalid" in err  # the dry run's failure reaches the user
    assert "the configuration check failed (above): nothing was prepared or started" in err
    assert recorder.calls == [] and not (tmp_path / "data").exists()


@pytest.mark.parametrize("continue_on_error, started", [("0", 1), ("1", 2)])
def test_a_failed_run_stops_the_grid_unless_continue_on_error(tmp_path, capsys, continue_on_error, started):
    """In CPU-smoke mode (no configuration check to pay for; the tiny assets are kept when current)."""
    status, recorder = launch(tmp_path, ["figure", "guru-figure5"], Recorder(main_ppo_status=3),
                              CONTINUE_ON_ERROR=continue_on_error, VERL_EXT_CPU_SMOKE="1")
    assert status == 1
    assert recorder.modules() == ["verl.trainer.main_ppo"] * started
    assert all(env["VERL_PLATFORM"] == "cpu" for _, env in recorder.calls)  # the CPU profile's environment
    err = capsys.readouterr().err
    assert "failed run(s): " + ", ".join(["red_weight-on_policy", "grpo-on_policy"][:started]) in err
    status, _ = launch(tmp_path, ["run", "guru-qwen2.5-7b", "grpo"], Recorder(main_ppo_status=3), VERL_EXT_CPU_SMOKE="1")
    assert status == 3  # one run: main_ppo's own exit status


def test_cpu_smoke_overrides_win_and_the_algorithm_and_staleness_stay(tmp_path):
    from verl_ext.cpu.profile import cpu_overrides

    cell, = planned_runs(tmp_path, "run", "guru-qwen3-30b-a3b", "rec_gspo_nois@6e-4_8e-4", "sync_interval_8",
                          "trainer.test_freq=7", VERL_EXT_CPU_SMOKE="1")
    argv = cell.main_ppo_args
    assert cell.title.endswith("(cpu smoke)")
    keys = [item.lstrip("+").split("=", 1)[0] for item in argv[2:]]
    assert len(keys) == len(set(keys))  # merged: one entry per key
    for override in cpu_overrides(cell.metrics_file.parents[4] / "unused"):  # keys only: values below
        assert override_value(argv, override.lstrip("+").split("=", 1)[0])
    from verl_ext.experiments.environment import read_environment

    for override in cpu_overrides(read_environment(script_environment(tmp_path)).tiny_assets):
        assert override in argv  # with its "+" when it adds a key
    assert override_value(argv, "trainer.total_training_steps") == "2"
    assert override_value(argv, "trainer.resume_mode") == "disable"
    assert override_value(argv, "actor_rollout_ref.actor.policy_loss.loss_mode") == "rec_gspo_nois"
    assert (override_value(argv, "actor_rollout_ref.actor.clip_ratio_low"),
            override_value(argv, "actor_rollout_ref.actor.clip_ratio_high")) == ("0.0006", "0.0008")
    assert override_value(argv, "trainer.v1.delayed_sync.sync_interval") == "8"
    assert override_value(argv, "trainer.test_freq") == "7"
    assert f"{tmp_path}/outputs/cpu-smoke/metrics/" in override_value(argv, "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH")


def test_gpu_smoke_overrides_win(tmp_path):
    from verl_ext.gpu.profile import gpu_smoke_overrides

    assets = tmp_path / "tiny-gpu"
    cell, = planned_runs(tmp_path, "run", "gsm8k", "grpo", VERL_EXT_GPU_SMOKE="1", VERL_EXT_TINY_GPU_ASSETS=str(assets))
    for override in gpu_smoke_overrides(assets):
        assert override in cell.main_ppo_args
    assert override_value(cell.main_ppo_args, "trainer.total_training_steps") == "2"
    assert "/gpu-smoke/checkpoints/" in override_value(cell.main_ppo_args, "trainer.default_local_dir")


def test_environment_variables_reach_the_overrides(tmp_path):
    cell, = planned_runs(tmp_path, "run", "toolace", "grpo", "offline", LOGGER="console,wandb", N_GPUS_PER_NODE="4",
                          NNODES="2", EXPERIMENT_NAME="mine", PROJECT_NAME="proj", TOTAL_STEPS="7", KL_TO_INITIAL="0",
                          ZERO_VARIANCE_MASKING="1")
    argv = cell.main_ppo_args
    assert override_value(argv, "trainer.logger") == "[console,wandb,file]"
    assert (override_value(argv, "trainer.n_gpus_per_node"), override_value(argv, "trainer.nnodes")) == ("4", "2")
    assert (override_value(argv, "trainer.project_name"), override_value(argv, "trainer.experiment_name")) == ("proj", "mine")
    assert override_value(argv, "trainer.total_training_steps") == "7"
    assert override_value(argv, "actor_rollout_ref.actor.use_kl_loss") == "false"
    assert override_value(argv, "trainer.v1.delayed_sync.zero_variance_masking") == "true"
    cells = planned_runs(tmp_path, "figure", "gsm8k-figure9", EXPERIMENT_NAME="try2", LEARNING_RATES="3e-6",
                          SETTINGS="sync_offset_4")
    assert [cell.title for cell in cells] == [
        "gsm8k-figure9/try2-grpo-lr3e-06-sync_offset_4",
        "gsm8k-figure9/try2-rec_oneside_nois@0.6_2-lr3e-06-sync_offset_4",
    ]
    assert override_value(cells[0].main_ppo_args, "actor_rollout_ref.actor.optim.lr") == "3e-06"


def test_sweep_builds_its_grid(tmp_path):
    cells = planned_runs(tmp_path, "sweep", "gsm8k", "--algorithms", "grpo,rec_oneside_nois@0.6_2.0", "--settings",
                          "on_policy,sync_interval_4_offset_2", "--learning-rates", "2e-6", "--project", "mine", "data.seed=3")
    assert sorted(cell.title for cell in cells) == sorted(
        f"mine/{label}-lr2e-06-{setting}"
        for label in ("grpo", "rec_oneside_nois@0.6_2")
        for setting in ("on_policy", "sync_interval_4_offset_2")
    )
    argv = next(cell for cell in cells if cell.name == "grpo-lr2e-06-sync_interval_4_offset_2").main_ppo_args
    assert (override_value(argv, "trainer.v1.delayed_sync.sync_interval"), override_value(argv, "trainer.v1.delayed_sync.sync_offset")) == ("4", "2")
    assert float(override_value(argv, "actor_rollout_ref.actor.optim.lr")) == 2e-6
    assert override_value(argv, "data.seed") == "3"
    cell, = planned_runs(tmp_path, "sweep", "gsm8k", "--algorithms=reinforce")
    assert cell.title == "verl-ext-gsm8k-qwen2.5-1.5b/rec_reinforce-on_policy"  # the alias, written out one way


def test_zero_variance_masking_is_the_offpolicy_grpo_default_and_can_be_turned_off(tmp_path, capsys):
    cells = planned_runs(tmp_path, "figure", "gsm8k-offpolicy-grpo", ZERO_VARIANCE_MASKING="0")
    assert [cell.name for cell in cells] == ["offpolicy_grpo-on_policy", "offpolicy_grpo-sync_interval_10"]
    assert not [item for cell in cells for item in cell.main_ppo_args if item.startswith("trainer.v1.delayed_sync.zero_variance")]
    status, recorder = launch(tmp_path, ["figure", "gsm8k-offpolicy-grpo"], VERL_EXT_DRY_RUN="1", ZERO_VARIANCE_MASKING="yes")
    assert status == 2 and "ZERO_VARIANCE_MASKING='yes' must be 0 or 1" in capsys.readouterr().err


def test_list_names_every_profile_algorithm_setting_and_figure(capsys):
    from verl_ext.algorithms import presets as algorithms
    from verl_ext.experiments import catalogue, profiles

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in [*profiles.PROFILES, *algorithms.ALGORITHMS, *catalogue.FIGURES, "sync_interval_M_offset_N", "mixed", "reinforce"]:
        assert name in out, name
