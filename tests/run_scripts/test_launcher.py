"""The launcher (run_scripts/lib/common.sh) without Python or GPUs: names are checked before anything starts,
a machine without GPUs is told what to do instead, the real-run path prepares data and calls main_ppo with
the run's overrides, and in CPU-smoke mode the CPU profile's overrides win while the algorithm's stay."""

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.run_scripts.scripts import REPO, RUN_SCRIPTS, override_value, queued_runs, run_script, script_environment


def fake_command(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.mark.parametrize(
    "args, message",
    [
        (("gsm8k", "rec_onesided_nois"), "unknown algorithm 'rec_onesided_nois'. Allowed: reinforce grpo rec_oneside_is"),
        (("gsm8k", "grpo", "sync_intervall_20"), "unknown setting 'sync_intervall_20'. Allowed: on_policy sync_interval_<M>"),
        (("gsm8k", "grpo", "sync_interval_0"), "sync_interval must be an integer >= 1"),
        (("gsm8k-qwen7b", "grpo"), "unknown profile 'gsm8k-qwen7b'. Allowed: gsm8k-qwen2.5-1.5b"),
        (("gsm8k", "reinforce@0.6_2.0"), "'reinforce' has no clipping range"),
        (("gsm8k", "rec_oneside_nois@0.6"), "write the clipping range as NAME@EPS_LOW_EPS_HIGH"),
        (("gsm8k",), "usage: run.sh PROFILE ALGORITHM"),
    ],
)
def test_bad_names_stop_before_anything_runs(tmp_path, args, message):
    calls = tmp_path / "python-calls"
    python = fake_command(tmp_path, "python", f'echo "$@" >> {calls}\n')
    for mode in ({}, {"VERL_EXT_DRY_RUN": "1"}):
        result = run_script("run.sh", *args, env=script_environment(tmp_path, PYTHON=str(python), **mode))
        assert result.returncode == 2
        assert message in result.stderr
    assert not calls.exists()


def test_a_bad_name_anywhere_in_a_grid_stops_the_sweep_before_its_first_run(tmp_path):
    calls = tmp_path / "python-calls"
    python = fake_command(tmp_path, "python", f'echo "$@" >> {calls}\n')
    env = script_environment(tmp_path, PYTHON=str(python), VERL_EXT_DRY_RUN="1", ALGORITHMS="grpo opmd@0.2_0.2")
    result = run_script("gsm8k/figure10_opmd_asymre.sh", env=env)
    assert result.returncode == 2 and "'opmd' has no clipping range" in result.stderr
    assert not calls.exists()


def test_without_gpus_the_script_says_what_to_do_and_starts_nothing(tmp_path):
    calls = tmp_path / "python-calls"
    python = fake_command(tmp_path, "python", f'echo "$@" >> {calls}\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_command(bin_dir, "nvidia-smi", 'echo "GPU 0: NVIDIA H100 (UUID: GPU-1)"\necho "GPU 1: NVIDIA H100 (UUID: GPU-2)"\n')
    env = script_environment(tmp_path, PYTHON=str(python), PATH=f"{bin_dir}:{os.environ['PATH']}")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    result = run_script("gsm8k/figure4_red.sh", env=env)
    assert result.returncode == 1
    for text in (
        "This run needs 8 GPU(s) per node (N_GPUS_PER_NODE=8, NNODES=1)",
        "found 2 NVIDIA GPU(s)",
        "VERL_EXT_DRY_RUN=1 bash run_scripts/gsm8k/figure4_red.sh",
        "VERL_EXT_CPU_SMOKE=1 bash run_scripts/gsm8k/figure4_red.sh",
        "verl-ext lab",
        "Nothing was started",
    ):
        assert text in result.stderr, text
    assert not calls.exists()  # no data preparation, no main_ppo, no Ray


def test_a_real_run_prepares_missing_data_then_calls_main_ppo_with_its_overrides(tmp_path):
    """GPU-only collaborators replaced: nvidia-smi reports 8 GPUs and `python` records its calls (and writes the
    parquet files data_prep would)."""
    log = tmp_path / "calls.jsonl"
    python = fake_command(
        tmp_path,
        "python",
        f"""python3 -c 'import json, os, sys; print(json.dumps({{"argv": sys.argv[1:], "logger_path": os.environ.get("VERL_FILE_LOGGER_PATH")}}))' "$@" >> {log}
if [ "$2" = data_prep.math ]; then mkdir -p "$4"; touch "$4/train.parquet" "$4/test.parquet" "$4/math500.parquet"; fi
""",
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_command(bin_dir, "nvidia-smi", 'for i in 0 1 2 3 4 5 6 7; do echo "GPU $i: NVIDIA H100"; done\n')
    metrics = tmp_path / "outputs" / "metrics" / "math-figure11"
    metrics.mkdir(parents=True)
    (metrics / "grpo-on_policy.jsonl").write_text('{"step": 1, "data": {}}\n')  # an earlier run's log
    env = script_environment(tmp_path, PYTHON=str(python), PATH=f"{bin_dir}:{os.environ['PATH']}", ALGORITHMS="red_weight,grpo",
                             RAW_DATA_PATH="/raw/math", MODEL_PATH="/models/llama")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    result = run_script("math/figure11_red_weight.sh", "trainer.save_freq=50", env=env)
    assert result.returncode == 0, result.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    data_dir = tmp_path / "data" / "math"
    # every cell's configuration is checked first, in one process, before any data work
    assert calls[0]["argv"][:4] == ["-m", "verl_ext.preflight", "--quiet", "--queue"]
    assert calls[1]["argv"] == ["-m", "data_prep.math", "--local_save_dir", str(data_dir), "--local_dataset_path", "/raw/math"]
    assert [call["argv"][:2] for call in calls[2:]] == [["-m", "verl.trainer.main_ppo"]] * 2  # data prepared once
    for call, label in zip(calls[2:], ("red_weight", "grpo")):
        argv = call["argv"][2:]
        assert argv[:2] == [f"--config-path={REPO}/recipe/rec/config", "--config-name=rec_trainer"]
        assert override_value(argv, "data.val_files") == f"{data_dir}/math500.parquet"
        assert override_value(argv, "actor_rollout_ref.model.path") == "/models/llama"
        assert override_value(argv, "trainer.save_freq") == "50"  # the user's extra override
        assert override_value(argv, "trainer.experiment_name") == f"{label}-on_policy"
        logger_path = str(metrics / f"{label}-on_policy.jsonl")
        assert call["logger_path"] == logger_path
        assert override_value(argv, "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH") == logger_path
        description = json.loads((metrics / f"{label}-on_policy.run.json").read_text())
        assert (description["run"], description["group"], description["cpu_smoke"]) == (label, "on_policy", False)
    # the earlier log was kept, not truncated by verl's file logger
    assert (metrics / "grpo-on_policy.part1.jsonl").read_text() == '{"step": 1, "data": {}}\n'


def test_cpu_smoke_overrides_win_and_the_algorithm_and_staleness_stay(tmp_path):
    (name, argv), = queued_runs("run.sh", tmp_path, "guru-qwen3-30b-a3b", "rec_gspo_nois@6e-4_8e-4", "sync_interval_8",
                                "trainer.test_freq=7", VERL_EXT_CPU_SMOKE="1")
    assert name.endswith("(cpu smoke)")
    keys = [item.lstrip("+").split("=", 1)[0] for item in argv[2:]]
    assert len(keys) == len(set(keys))  # merged: one entry per key
    from verl_ext.cpu.profile import cpu_overrides

    for override in cpu_overrides(REPO / "assets" / "tiny"):
        key, value = override.lstrip("+").split("=", 1)
        assert override_value(argv, key) == value, key
        assert override in argv  # with its "+" when it adds a key
    assert override_value(argv, "trainer.total_training_steps") == "2"
    assert override_value(argv, "trainer.resume_mode") == "disable"
    assert override_value(argv, "actor_rollout_ref.actor.policy_loss.loss_mode") == "rec_gspo_nois"
    assert (override_value(argv, "actor_rollout_ref.actor.clip_ratio_low"), override_value(argv, "actor_rollout_ref.actor.clip_ratio_high")) == ("6e-4", "8e-4")
    assert override_value(argv, "trainer.v1.delayed_sync.sync_interval") == "8"
    assert override_value(argv, "trainer.test_freq") == "7"
    assert "/cpu-smoke/metrics/" in override_value(argv, "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH")


def test_environment_variables_reach_the_overrides(tmp_path):
    (_, argv), = queued_runs("run.sh", tmp_path, "toolace", "grpo", "offline", LOGGER="console,wandb",
                             N_GPUS_PER_NODE="4", NNODES="2", EXPERIMENT_NAME="mine", PROJECT_NAME="proj", TOTAL_STEPS="7",
                             KL_TO_INITIAL="0", ZERO_VARIANCE_MASKING="1")
    assert override_value(argv, "trainer.logger") == "[console,wandb,file]"
    assert (override_value(argv, "trainer.n_gpus_per_node"), override_value(argv, "trainer.nnodes")) == ("4", "2")
    assert (override_value(argv, "trainer.project_name"), override_value(argv, "trainer.experiment_name")) == ("proj", "mine")
    assert override_value(argv, "trainer.total_training_steps") == "7"
    assert override_value(argv, "actor_rollout_ref.actor.use_kl_loss") == "false"
    assert override_value(argv, "trainer.v1.delayed_sync.zero_variance_masking") == "true"
    runs = queued_runs("gsm8k/figure9_learning_rates.sh", tmp_path, EXPERIMENT_NAME="try2", LEARNING_RATES="3e-6",
                       SETTINGS="sync_offset_4")
    assert [name for name, _ in runs] == [
        "gsm8k-figure9/try2-grpo-lr3e-6-sync_offset_4",
        "gsm8k-figure9/try2-rec_oneside_nois-eps0.6_2.0-lr3e-6-sync_offset_4",
    ]


def test_sweep_script_builds_its_grid(tmp_path):
    runs = queued_runs("sweep.sh", tmp_path, "gsm8k", "--algorithms", "grpo,rec_oneside_nois@0.6_2.0", "--settings",
                       "on_policy,sync_interval_4_offset_2", "--learning-rates", "2e-6", "--project", "mine", "data.seed=3")
    assert sorted(name for name, _ in runs) == sorted(
        f"mine/{label}-lr2e-6-{setting}"
        for label in ("grpo", "rec_oneside_nois-eps0.6_2.0")
        for setting in ("on_policy", "sync_interval_4_offset_2")
    )
    argv = dict(runs)["mine/grpo-lr2e-6-sync_interval_4_offset_2"]
    assert (override_value(argv, "trainer.v1.delayed_sync.sync_interval"), override_value(argv, "trainer.v1.delayed_sync.sync_offset")) == ("4", "2")
    assert override_value(argv, "actor_rollout_ref.actor.optim.lr") == "2e-6"
    assert override_value(argv, "data.seed") == "3"


def test_merge_keeps_the_last_value_of_each_key_and_its_plus():
    script = f"""source {RUN_SCRIPTS}/lib/common.sh
verl_ext_merge a.b=1 +c.d=x e=1 a.b=2 c.d=y ~f e=3
printf '%s\\n' "${{VERL_EXT_MERGED[@]}}"
"""
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["a.b=2", "+c.d=y", "~f", "e=3"]


def test_zero_variance_masking_is_the_offpolicy_grpo_default_and_can_be_turned_off(tmp_path):
    runs = queued_runs("gsm8k/offpolicy_grpo.sh", tmp_path, ZERO_VARIANCE_MASKING="0")
    assert sorted(name for name, _ in runs) == ["gsm8k-offpolicy-grpo/offpolicy_grpo-on_policy",
                                                "gsm8k-offpolicy-grpo/offpolicy_grpo-sync_interval_10"]
    assert not [item for _, argv in runs for item in argv if item.startswith("trainer.v1.delayed_sync.zero_variance")]
    result = run_script("gsm8k/offpolicy_grpo.sh", env=script_environment(tmp_path, VERL_EXT_DRY_RUN="1", ZERO_VARIANCE_MASKING="yes"))
    assert result.returncode == 2 and "ZERO_VARIANCE_MASKING='yes' must be 0 or 1" in result.stderr
