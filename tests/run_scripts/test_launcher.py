"""The bash entry points are thin: each kind (a figure script, run.sh, sweep.sh) hands its arguments and the
environment to the Python launcher (bash alone, $PYTHON recorded), and a figure script reaches the real
launcher (one subprocess, stopped by the GPU check before any config is composed: no GPU here). The launcher
itself is tested in this process: tests/experiments/test_launch.py."""

import os
import stat

import pytest

from tests.run_scripts.scripts import RUN_SCRIPTS, run_script, script_environment


def fake_command(directory, name, body):
    path = directory / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def no_gpus(tmp_path):
    """An nvidia-smi that lists none (the real one may be missing: same answer)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_command(bin_dir, "nvidia-smi", "exit 0\n")
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize("script, args, command", [
    ("gsm8k/figure4_red.sh", ("trainer.save_freq=5",), ["figure", "gsm8k-figure4", "trainer.save_freq=5"]),
    ("run.sh", ("gsm8k", "grpo", "offline", "a b=1"), ["run", "gsm8k", "grpo", "offline", "a b=1"]),
    ("sweep.sh", ("gsm8k", "--algorithms", "grpo,opmd"), ["sweep", "gsm8k", "--algorithms", "grpo,opmd"]),
])
def test_each_entry_point_hands_its_arguments_and_environment_to_the_launcher(tmp_path, script, args, command):
    """$PYTHON recorded: bash passes every argument as it is (quoting kept) and the environment through."""
    record = tmp_path / "record"
    python = fake_command(tmp_path, "python", f'printf "%s\\n" "$@" > {record}; echo "$ALGORITHMS" >> {record}; exit 7\n')
    result = run_script(script, *args, env=script_environment(tmp_path, PYTHON=str(python), ALGORITHMS="grpo"), timeout=30)
    assert result.returncode == 7  # exec: the launcher's exit status is the script's
    assert record.read_text().splitlines() == ["-m", "verl_ext.experiments", *command, "grpo"]


def test_a_figure_script_reaches_the_real_launcher(tmp_path, no_gpus):
    """One subprocess through the real launcher, stopped by the GPU check before any config is composed."""
    env = script_environment(tmp_path, **no_gpus, ALGORITHMS="red_drop", N_GPUS_PER_NODE="4")
    result = run_script("gsm8k/figure4_red.sh", "trainer.save_freq=5", env=env, timeout=120)
    assert result.returncode == 1, result.stderr
    for text in ("[verl-ext] gsm8k-figure4: 2 run(s) of profile gsm8k-qwen2.5-1.5b", "This run needs 4 GPU(s) per node",
                 "VERL_EXT_DRY_RUN=1 bash run_scripts/gsm8k/figure4_red.sh trainer.save_freq=5", "Nothing was started"):
        assert text in result.stderr, text
    assert not (tmp_path / "data").exists()


def test_the_bash_entry_points_are_thin():
    """Every figure script, run.sh and sweep.sh execs the launcher; no bash launcher is left to drift."""
    scripts = sorted(RUN_SCRIPTS.glob("*/figure*.sh")) + [RUN_SCRIPTS / "gsm8k" / name for name in ("offpolicy_grpo.sh", "high_staleness.sh")]
    from verl_ext.experiments.catalogue import FIGURES

    assert sorted(str(path.relative_to(RUN_SCRIPTS.parent)) for path in scripts) == sorted(f.script for f in FIGURES.values())
    for path in [*scripts, RUN_SCRIPTS / "run.sh", RUN_SCRIPTS / "sweep.sh"]:
        code = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
        assert len(code) == 1 and code[0].startswith('exec "${PYTHON:-python}" -m verl_ext.experiments '), path
    assert not (RUN_SCRIPTS / "lib" / "common.sh").exists() and not (RUN_SCRIPTS / "lib" / "presets.sh").exists()


def test_the_gpu_count_reads_nvidia_smi_and_cuda_visible_devices(tmp_path):
    from verl_ext.gpu.device import count_nvidia_gpus

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_command(bin_dir, "nvidia-smi", 'echo "GPU 0: NVIDIA H100 (UUID: GPU-1)"\necho "GPU 1: NVIDIA H100 (UUID: GPU-2)"\n')
    path = f"{bin_dir}:{os.environ['PATH']}"
    assert count_nvidia_gpus({"PATH": path}) == 2
    assert count_nvidia_gpus({"PATH": path, "CUDA_VISIBLE_DEVICES": "1"}) == 1
    assert count_nvidia_gpus({"PATH": path, "CUDA_VISIBLE_DEVICES": ""}) == 0
    assert count_nvidia_gpus({"PATH": str(tmp_path / "nothing")}) == 0  # no nvidia-smi
