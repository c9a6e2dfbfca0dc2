"""The bash entry points' arguments: parsing always ends (an option without its value is an error, exit 2),
an extra argument that is not a Hydra override is refused, and a real run checks its configuration before it
prepares (possibly downloads) data. Python is a recording stand-in here: nothing but bash runs."""

import os

import pytest

from tests.run_scripts.scripts import run_script, script_environment
from tests.run_scripts.test_launcher import fake_command

TIMEOUT = 20  # parsing loops forever when an option's shift fails: the timeout turns a hang into a failure

SWEEP_OPTIONS = ("--algorithms", "--settings", "--learning-rates", "--project")


def recording_python(tmp_path, preflight_exit: int = 0):
    calls = tmp_path / "python-calls"
    body = f'echo "$@" >> {calls}\n'
    body += f'if [ "$2" = verl_ext.preflight ]; then echo "== a run ==\nFAILED: ConfigError: the key"; exit {preflight_exit}; fi\n'
    body += 'if [ "$2" = data_prep.gsm8k ]; then mkdir -p "$4"; touch "$4/train.parquet" "$4/test.parquet"; fi\n'
    return fake_command(tmp_path, "python", body), calls


def called(calls) -> list[str]:
    return calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize("option", SWEEP_OPTIONS)
@pytest.mark.parametrize("position", ["last", "before another option", "empty"])
def test_a_sweep_option_without_its_value_is_an_error(tmp_path, option, position):
    python, calls = recording_python(tmp_path)
    args = {"last": ["--algorithms", "grpo", option] if option != "--algorithms" else [option],
            "before another option": [option, "--settings" if option != "--settings" else "--project", "x"],
            "empty": [f"{option}="]}[position]
    result = run_script("sweep.sh", "gsm8k", *args, env=script_environment(tmp_path, PYTHON=str(python)), timeout=TIMEOUT)
    assert result.returncode == 2, result.stderr
    assert f"error: sweep.sh: option {option} needs a value" in result.stderr
    assert "usage: sweep.sh PROFILE" in result.stderr
    assert called(calls) == []


def test_sweep_options_take_the_equals_form_and_unknown_ones_are_named(tmp_path):
    python, calls = recording_python(tmp_path)
    env = script_environment(tmp_path, PYTHON=str(python), VERL_EXT_DRY_RUN="1", VERL_EXT_PREFLIGHT_QUEUE=str(tmp_path / "q"))
    result = run_script("sweep.sh", "gsm8k", "--algorithms=grpo", "--settings=offline", env=env, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert '"gsm8k-qwen2.5-1.5b' not in (tmp_path / "q").read_text()  # project default is verl-ext-<profile>
    assert "verl-ext-gsm8k-qwen2.5-1.5b/grpo-offline" in (tmp_path / "q").read_text()
    result = run_script("sweep.sh", "gsm8k", "--algorithm", "grpo", env=env, timeout=TIMEOUT)
    assert result.returncode == 2 and "unknown option --algorithm (allowed: --algorithms" in result.stderr


@pytest.mark.parametrize("script,args", [
    ("run.sh", ("gsm8k", "grpo", "on_policy", "--help")),
    ("run.sh", ("gsm8k", "grpo", "sync_interval_4", "trainer.total_training_steps")),
    ("gsm8k/figure4_red.sh", ("--steps", "3")),
    ("sweep.sh", ("gsm8k", "--algorithms", "grpo", "data.seed")),
])
def test_an_extra_argument_that_is_not_an_override_stops_the_script(tmp_path, script, args):
    python, calls = recording_python(tmp_path)
    for mode in ({}, {"VERL_EXT_DRY_RUN": "1"}):
        result = run_script(script, *args, env=script_environment(tmp_path, PYTHON=str(python), **mode), timeout=TIMEOUT)
        assert result.returncode == 2, result.stderr
        assert "Hydra override" in result.stderr
    assert called(calls) == []


def eight_gpus(tmp_path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake_command(bin_dir, "nvidia-smi", 'for i in 0 1 2 3 4 5 6 7; do echo "GPU $i: NVIDIA H100"; done\n')
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize("script,args,checked", [
    ("run.sh", ("gsm8k", "grpo", "data.train_batch_size=0"), "--name"),
    ("gsm8k/figure4_red.sh", ("data.train_batch_size=0",), "--queue"),
])
def test_a_real_run_checks_its_configuration_before_preparing_data(tmp_path, script, args, checked):
    """The real (GPU) path runs the dry run's checks first; when they fail, no data is prepared, nothing starts."""
    python, calls = recording_python(tmp_path, preflight_exit=1)
    env = script_environment(tmp_path, PYTHON=str(python), **eight_gpus(tmp_path))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    result = run_script(script, *args, env=env, timeout=TIMEOUT)
    assert result.returncode == 2, result.stderr
    assert "configuration check" in result.stderr and "nothing was prepared or started" in result.stderr
    assert "FAILED: ConfigError: the key" in result.stderr  # preflight's report reaches the user
    lines = called(calls)
    assert len(lines) == 1 and lines[0].startswith(f"-m verl_ext.preflight --quiet {checked}")
    assert "data.train_batch_size=0" in lines[0] or checked == "--queue"
    assert not (tmp_path / "data").exists()


def test_a_real_run_whose_check_passes_goes_on_to_data_and_main_ppo(tmp_path):
    python, calls = recording_python(tmp_path, preflight_exit=0)
    env = script_environment(tmp_path, PYTHON=str(python), **eight_gpus(tmp_path))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    result = run_script("run.sh", "gsm8k", "grpo", env=env, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    modules = [line.split()[1] for line in called(calls)]
    assert modules == ["verl_ext.preflight", "data_prep.gsm8k", "verl.trainer.main_ppo"]
    preflight_argv, main_ppo_argv = called(calls)[0].split(" -- ", 1)[1], called(calls)[2].split(" ", 2)[2]
    assert preflight_argv == main_ppo_argv  # the very arguments main_ppo gets were checked


@pytest.mark.parametrize("args,env,message", [
    (("gsm8k", "grpo", "sync_interval_" + "9" * 25), {}, "sync_interval must be an integer >= 1"),
    (("gsm8k", "grpo", "sync_offset_1234567890"), {}, "(at most 9 digits)"),
    (("gsm8k", "grpo"), {"N_GPUS_PER_NODE": "9" * 20}, "N_GPUS_PER_NODE='" + "9" * 20 + "' must be an integer >= 1"),
    (("gsm8k", "grpo"), {"NNODES": "-1"}, "NNODES='-1' must be an integer >= 1"),
    (("gsm8k", "rec_oneside_nois@nan_0.2"), {}, "write the clipping range as NAME@EPS_LOW_EPS_HIGH"),
])
def test_huge_or_malformed_numbers_are_named_not_overflowed(tmp_path, args, env, message):
    """bash compares integers in 64 bits: a longer one made `[ -lt ]` print "integer expression expected" and
    let the value through."""
    python, calls = recording_python(tmp_path)
    result = run_script("run.sh", *args, env=script_environment(tmp_path, PYTHON=str(python), VERL_EXT_DRY_RUN="1", **env),
                        timeout=TIMEOUT)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "integer expression expected" not in result.stderr
    assert called(calls) == []
