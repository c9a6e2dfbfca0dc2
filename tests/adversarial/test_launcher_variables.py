"""Second round of hostile launcher variables and arguments (``bash run_scripts/...`` = ``python -m
verl_ext.experiments``): each is refused with ``[verl-ext] error:`` naming the variable or argument, exit 2,
before a config is composed, data prepared or a process started -- and before torch or verl is imported (a
refusal took 29-49 s on a busy machine when it came after ``import torch``). Legitimate odd paths (non-ASCII,
quotes, brackets, spaces) are carried to verl's config unchanged.

In-process with :class:`tests.experiments.test_launch.Recorder` standing in for the child processes (data_prep,
main_ppo) and the GPU count; one subprocess checks which modules a refusal imported.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.experiments.test_launch import launch
from tests.run_scripts.scripts import REPO, planned_runs
from verl_ext.experiments.environment import TRACKING_BACKENDS
from verl_ext.overrides import hydra_string

RUN = ["run", "gsm8k", "grpo"]
MODES = {"real": {}, "cpu smoke": {"VERL_EXT_CPU_SMOKE": "1"}, "dry run": {"VERL_EXT_DRY_RUN": "1"}}
# somewhere nothing can be created, even by root (sysfs): a read-only folder whatever the user
UNWRITABLE = Path("/sys/verl-ext-cannot-write-here")
needs_sysfs = pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux's /sys")


def refused(tmp_path, capsys, argv, message, modes=MODES, **env) -> str:
    """Run ``argv`` in each mode: exit 2, ``message`` on stderr, nothing started; the last mode's stderr."""
    for mode, flags in modes.items():
        status, recorder = launch(tmp_path, list(argv), **flags, **env)
        err = capsys.readouterr().err
        assert status == 2, f"{mode}: exit {status}: {err}"
        assert "[verl-ext] error:" in err and message in err, f"{mode}: {err}"
        assert "Traceback" not in err and recorder.calls == [], mode
    return err


# ---------------------------------------------------------------- output, data and asset folders


@pytest.mark.parametrize("variable", ["OUTPUT_DIR", "DATA_DIR", "VERL_EXT_TINY_ASSETS"])
def test_a_folder_variable_that_is_a_file_or_below_one_is_named(tmp_path, capsys, variable):
    file = tmp_path / "a-file"
    file.write_text("x")
    refused(tmp_path, capsys, RUN, f"{variable}={str(file)!r} cannot be a folder: it is a file", **{variable: str(file)})
    below = file / "outputs"
    refused(tmp_path, capsys, RUN, f"cannot be a folder: it is below {file}, which is a file", **{variable: str(below)})


@needs_sysfs
def test_an_unwritable_output_folder_is_named_before_anything_runs(tmp_path, capsys):
    writing = {mode: flags for mode, flags in MODES.items() if mode != "dry run"}  # the dry run writes nothing
    refused(tmp_path, capsys, RUN, f"OUTPUT_DIR='{UNWRITABLE}': cannot write in /sys", modes=writing,
            OUTPUT_DIR=str(UNWRITABLE))


@needs_sysfs
def test_an_unwritable_data_folder_is_named_when_data_must_be_prepared(tmp_path, capsys):
    status, recorder = launch(tmp_path, RUN, DATA_DIR=str(UNWRITABLE))
    err = capsys.readouterr().err
    assert status == 2 and f"DATA_DIR='{UNWRITABLE}': {UNWRITABLE}/gsm8k must be prepared" in err, err
    assert "cannot write in /sys" in err and recorder.calls == []  # no data_prep started


def test_a_metrics_file_that_is_a_folder_is_named(tmp_path, capsys):
    (tmp_path / "outputs" / "metrics" / "verl-ext-gsm8k-qwen2.5-1.5b" / "grpo-on_policy.jsonl").mkdir(parents=True)
    refused(tmp_path, capsys, RUN, "grpo-on_policy.jsonl exists and is not a regular file",
            modes={"real": {}})


@pytest.mark.parametrize("variable", ["OUTPUT_DIR", "DATA_DIR", "MODEL_PATH", "RAW_DATA_PATH", "VERL_EXT_TINY_ASSETS"])
@pytest.mark.parametrize("value, message", [
    ("/tmp/x${oc.env:HOME}", "contains '${': verl's config (OmegaConf) would read it as an interpolation"),
    ("/tmp/x\n", "contains the control character '\\n'"),
    ("/tmp/caf\udce9", "is not UTF-8 text"),  # a Latin-1 byte, as Python decodes an environment it cannot read
])
def test_a_path_verl_cannot_carry_is_named(tmp_path, capsys, variable, value, message):
    err = refused(tmp_path, capsys, RUN, message, modes={"real": {}}, **{variable: value})
    assert err.startswith(f"[verl-ext] error: {variable}=")


@pytest.mark.parametrize("variable", ["DATA_DIR", "VERL_EXT_TINY_ASSETS", "VERL_EXT_TINY_GPU_ASSETS"])
@pytest.mark.parametrize("folder", ["runs [2]", "data*", "what?"])
def test_a_data_folder_hf_datasets_would_read_as_a_glob_is_named(tmp_path, capsys, variable, folder):
    """verl's RLHFDataset hands data.train_files to datasets.load_dataset, which globs it: under "runs [2]" it
    found no file (a ValueError inside Ray, after start-up), under "data*" it would also read data1/, data2/."""
    refused(tmp_path, capsys, RUN, "verl loads its data files with HF datasets, which reads '*', '?' and '['",
            modes={"real": {}}, **{variable: str(tmp_path / folder)})


def test_a_raw_data_path_that_does_not_exist_is_named(tmp_path, capsys):
    refused(tmp_path, capsys, RUN, "RAW_DATA_PATH='/no/such/raw' does not exist", RAW_DATA_PATH="/no/such/raw")


ODD = "dé jà [v] {u} #1 'q' \"d\" a,b=c ü"  # every character that once made Hydra fail, in one folder name
ODD_DATA = ODD.replace("[v] ", "")  # a data folder may not hold '[' (HF datasets would take it as a glob)


def test_legitimate_odd_paths_reach_verls_config_unchanged(tmp_path):
    """A non-ASCII folder with quotes, brackets, braces, '#', ',', '=' and spaces: Hydra composes it, and the
    config verl's TaskRunner resolves (OmegaConf.resolve) holds exactly the path. Was Hydra's parse error."""
    from omegaconf import OmegaConf

    from verl_ext.runs import compose as composition

    odd, odd_data = tmp_path / ODD, tmp_path / ODD_DATA
    raw = odd / "raw"
    raw.mkdir(parents=True)
    (cell,) = planned_runs(tmp_path, *RUN, OUTPUT_DIR=str(odd / "out"), DATA_DIR=str(odd_data / "data"),
                            MODEL_PATH=str(odd / "model"), RAW_DATA_PATH=str(raw), EXPERIMENT_NAME="a=b+c@d")
    with composition.memoised_config_files():
        config = composition.parse_main_ppo_argv(cell.main_ppo_args).config()
    OmegaConf.resolve(config)
    assert config.data.train_files == str(odd_data / "data" / "gsm8k" / "train.parquet")
    assert config.actor_rollout_ref.model.path == str(odd / "model")
    assert config.trainer.default_local_dir == str(cell.checkpoints) and ODD in str(cell.checkpoints)
    assert config.ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH == str(cell.metrics_file)
    assert config.trainer.experiment_name == "a=b+c@d"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=16) | st.text(alphabet="ab/'\"\\$}{[]#,= .:@+-%\u00e9", max_size=12)
       | st.sampled_from(["null", "True", "inf", "-nan", "1e3", "0x10", "1_000", "10", "gpt2", ".5", ""]))
def test_any_path_without_an_interpolation_is_read_back_by_hydra_and_omegaconf_unchanged(text):
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    if "${" in text:
        with pytest.raises(ValueError, match="interpolation"):
            hydra_string(text)
        return
    value = OverridesParser.create().parse_override(f"a.b={hydra_string(text)}").value()
    config = OmegaConf.create({"a": {"b": value}})
    OmegaConf.resolve(config)  # what verl's TaskRunner does with the composed config
    assert config.a.b == text and type(config.a.b) is str


# ---------------------------------------------------------------- run and project names


@pytest.mark.parametrize("variable", ["PROJECT_NAME", "EXPERIMENT_NAME"])
@pytest.mark.parametrize("name, message", [
    ("null", "YAML and Hydra read it as null"),
    ("true", "YAML and Hydra read it as a boolean"),
    ("1e3", "YAML and Hydra read it as a number"),
    ("0x10", "YAML and Hydra read it as a number"),
    ("~", "use letters, digits"),
    ("run\n", "has white space (a newline?) at its start or end"),
    (".", "starts with '.'"),
    ("..", "starts with '.'"),
    ("x" * 201, "too long"),
])
def test_a_name_that_is_no_name_is_refused(tmp_path, capsys, variable, name, message):
    refused(tmp_path, capsys, RUN, message, modes={"real": {}}, **{variable: name})


def test_a_sweep_project_option_follows_the_same_rules(tmp_path, capsys):
    refused(tmp_path, capsys, ["sweep", "gsm8k", "--algorithms", "grpo", "--project", ".."], "--project='..' starts with '.'",
            modes={"real": {}})


def test_a_grid_prefix_that_makes_a_run_name_too_long_is_named(tmp_path, capsys):
    refused(tmp_path, capsys, ["figure", "gsm8k-figure4"], "EXPERIMENT_NAME: a name of", modes={"real": {}},
            EXPERIMENT_NAME="p" * 195)


# ---------------------------------------------------------------- logger and extra arguments


def test_an_unknown_logger_is_named_with_verls_backends(tmp_path, capsys):
    refused(tmp_path, capsys, RUN, "LOGGER='console,wandbb': 'wandbb' is not a logger of verl's", LOGGER="console,wandbb")


def test_the_launchers_logger_list_is_verls():
    from verl.utils.tracking import Tracking

    assert set(TRACKING_BACKENDS) == {*Tracking.supported_backend, "tracking"}


@pytest.mark.parametrize("override", ["data.train_files=/a'b", "trainer.note=[1,2", "+trainer.x={a:", "a.b=c d#e"])
def test_an_extra_argument_hydra_cannot_parse_is_named(tmp_path, capsys, override):
    refused(tmp_path, capsys, [*RUN, override], f"{override!r} is not a Hydra override Hydra can parse")


# ---------------------------------------------------------------- refused before heavy imports

HEAVY = ("torch", "verl", "ray", "transformers", "vllm", "matplotlib", "pandas", "pyarrow")
CASES = {
    "bad algorithm": (["run", "gsm8k", "rec_onesided"], {}),
    "bad setting": (["run", "gsm8k", "grpo", "sync_intervall_3"], {}),
    "bad profile": (["run", "gsm8k-7b", "grpo"], {}),
    "output folder is a file": (RUN, {"OUTPUT_DIR": "/etc/hostname"}),
    "interpolation in a path": (RUN, {"DATA_DIR": "/x${y}"}),
    "null name": (RUN, {"EXPERIMENT_NAME": "null"}),
    "unknown logger": (RUN, {"LOGGER": "wand"}),
    "unparsable override": ([*RUN, "a.b=[1"], {}),
    "bad smoke flag": (RUN, {"VERL_EXT_CPU_SMOKE": "yes"}),
    "CPU smoke, bad name": (RUN, {"VERL_EXT_CPU_SMOKE": "1", "PROJECT_NAME": ".."}),
    "verl-ext run, bad algorithm": (["run", "gsm8k", "rec_onesided"], {}),  # the console script's front
}
PROBE = """
import json, os, sys, time
from verl_ext.cli import main as cli_main
from verl_ext.experiments.__main__ import main
results = {}
for name, (argv, env) in json.loads(sys.argv[1]).items():
    started = time.perf_counter()
    if name.startswith("verl-ext "):
        os.environ.update(env)
        status = cli_main(argv)
    else:
        status = main(argv, {**os.environ, **env})
    results[name] = [status, time.perf_counter() - started]
print(json.dumps({"results": results, "heavy": sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2].split(",")))}))
"""


def test_every_bad_argument_or_variable_is_refused_without_importing_torch_or_verl(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VERL_EXT_", "VERL_FILE_LOGGER"))}
    env.update(OUTPUT_DIR=str(tmp_path / "outputs"), DATA_DIR=str(tmp_path / "data"), PYTHONPATH=str(REPO))
    completed = subprocess.run([sys.executable, "-c", PROBE, json.dumps(CASES), ",".join(HEAVY)], env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert {name: status for name, (status, _) in report["results"].items()} == {name: 2 for name in CASES}
    assert report["heavy"] == [], report  # none of them was imported for any of the refusals
    assert completed.stderr.count("[verl-ext] error:") == len(CASES)
