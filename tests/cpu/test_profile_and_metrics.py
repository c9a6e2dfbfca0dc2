"""The CPU profile composes with verl's config and the recipe's; the shell form equals the Python form;
verl's file-logger records are read back per step."""

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from verl_ext.cpu.backend import CPUBackend
from verl_ext.recipe import config_dir as recipe_config_dir
from verl_ext.runs.compose import compose as compose_run
from verl_ext.runs.outputs import Outputs
from verl_ext.runs.run import Run, verl_config_dir
from verl_ext.cpu.profile import cpu_overrides, shell_profile
from verl_ext.metrics_file import run_summary as summarize
from verl_ext.overrides import merge_overrides, override_key
from verl_ext.metrics_file import MetricsFileError, read_metrics_file


def test_merge_keeps_the_last_value_of_each_key_and_its_plus():
    merged = merge_overrides(["a=1", "+b.c=2", "d=3"], ["a=4", "b.c=5"], ["~e"])
    assert merged == ["d=3", "a=4", "+b.c=5", "~e"]
    assert override_key("++x.y=1") == "x.y"


@pytest.mark.parametrize("config_name", ["rec_trainer", "ppo_trainer"])
def test_profile_composes_and_passes_verls_validation(tiny_assets, tmp_path, config_name):
    """Every key the profile sets exists in verl's config (or is added with '+'); verl accepts the result."""
    import verl  # noqa: F401
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    # verl's own default estimator is GAE, which needs a critic model: the profile covers critic-free runs
    overrides = () if config_name == "rec_trainer" else ("algorithm.adv_estimator=grpo",)
    run = Run("compose", config_name=config_name, overrides=overrides)
    config_dir = recipe_config_dir() if config_name == "rec_trainer" else verl_config_dir()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        config = compose(config_name=config_name, overrides=list(compose_run(run, CPUBackend(tiny_assets), Outputs(tmp_path)).overrides))
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert config.actor_rollout_ref.rollout.name == "cpu"
    assert config.trainer.device == "cpu"
    assert Path(config.actor_rollout_ref.model.path) == tiny_assets / "model"
    assert config.actor_rollout_ref.rollout.engine_kwargs.cpu.event_log.endswith("rollout_events.jsonl")
    assert config.actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype == "fp32"


def test_shell_profile_defines_the_same_overrides(tiny_assets):
    script = shell_profile(tiny_assets) + 'printf "%s\\n" "${VERL_EXT_CPU_OVERRIDES[@]}"; echo "PLATFORM=$VERL_PLATFORM"'
    output = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.splitlines()
    assert output[:-1] == cpu_overrides(tiny_assets)
    assert output[-1] == "PLATFORM=cpu"


def test_profile_script_sources_cleanly(tiny_assets):
    repo = Path(__file__).resolve().parents[2]
    script = (
        f"export VERL_EXT_TINY_ASSETS={shlex.quote(str(tiny_assets))}; export PYTHON={shlex.quote(__import__('sys').executable)}; "
        f"source {shlex.quote(str(repo / 'run_scripts' / 'cpu' / 'profile.sh'))} && echo ${{#VERL_EXT_CPU_OVERRIDES[@]}}"
    )
    output = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert int(output[-1]) == len(cpu_overrides(tiny_assets))


def test_step_metrics_merge_records_of_a_step_and_name_a_bad_line(tmp_path):
    path = tmp_path / "m.jsonl"
    records = [
        {"step": 0, "data": {"val/score": 0.1}},
        {"step": 1, "data": {"training/global_step": 1, "critic/score/mean": 0.1, "timing_s/step": 2.0}},
        {"step": 1, "data": {"extra": 1}},
        {"step": 2, "data": {"training/global_step": 2, "critic/score/mean": 0.5, "timing_s/step": 1.0}},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    steps = read_metrics_file(path).steps
    assert [s["step"] for s in steps] == [0, 1, 2] and steps[1]["extra"] == 1
    summary = summarize(steps)
    assert summary["steps"] == 2 and summary["reward_start"] == 0.1 and summary["reward_end"] == 0.5
    assert summary["first_step_seconds"] == 2.0
    assert summary["steps_per_second"] == pytest.approx(1 / 1.0)  # steps after the first
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(MetricsFileError, match="line 5"):
        read_metrics_file(path)


@pytest.mark.parametrize(
    "kwargs, error",
    [({"name": "has space"}, "name"), ({"name": "x", "steps": 0}, "steps"), ({"name": "x", "overrides": "a=1"}, "sequence")],
)
def test_bad_runs_are_refused_before_anything_starts(kwargs, error):
    with pytest.raises((ValueError, TypeError), match=error):
        Run(**kwargs)


def test_dataprotos_travel_as_raw_bytes_in_a_cpu_run_and_arrive_unchanged(monkeypatch):
    """The CPU environment selects verl's 'numpy' pickling of DataProto (each response goes to a reward worker as
    one): verl still reads the variable on both sides, and a reward worker's input arrives bit for bit."""
    import inspect
    import pickle

    import numpy as np
    import torch
    from tensordict import TensorDict
    from verl.protocol import DataProto

    from verl_ext.cpu.profile import cpu_environment

    variable = "VERL_DATAPROTO_SERIALIZATION_METHOD"
    assert cpu_environment()[variable] == "numpy"
    for side in (DataProto.__getstate__, DataProto.__setstate__):
        assert f'os.getenv("{variable}") == "numpy"' in inspect.getsource(side), f"verl no longer reads {variable}"
    monkeypatch.setenv(variable, "numpy")
    batch = TensorDict({"responses": torch.tensor([[5, 6, 7]]), "attention_mask": torch.ones(1, 5, dtype=torch.int64),
                        "old_log_probs": torch.tensor([[-0.25, -1.5, -3.0e-8]])}, batch_size=1)
    sent = DataProto(batch=batch, non_tensor_batch={"reward_model": np.array([{"ground_truth": "3"}], dtype=object)},
                     meta_info={"global_steps": 4})
    monkeypatch.setattr(torch, "save", lambda *args, **kwargs: pytest.fail("pickled with torch.save"))
    arrived = pickle.loads(pickle.dumps(sent))
    for key, tensor in sent.batch.items():
        assert arrived.batch[key].dtype == tensor.dtype and torch.equal(arrived.batch[key], tensor), key
    assert arrived.non_tensor_batch["reward_model"][0] == {"ground_truth": "3"} and arrived.meta_info == {"global_steps": 4}
