"""The GPU tests' run cache, on CPU: a run recorded by an earlier command (VERL_EXT_GPU_TEST_DIR) is reused
only while its overrides are unchanged. (The runs themselves need a GPU: tests/gpu/test_main_ppo_gpu.py.)"""

import json
import shutil
from pathlib import Path

from tests.gpu.gpu_runs import FAMILIES, GPURuns, run_specs
from verl_ext.algorithms.registry import loss_metric_names
from verl_ext.metrics_file import read_metrics_file

RUN = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "gpu_smoke" / "cpu_backend_delayed_sync_3_1.jsonl"


def record_run(runs: GPURuns, name: str, overrides: list[str]) -> None:
    paths = runs.outputs.paths(runs.specs[name])
    paths.run_dir.mkdir(parents=True)
    shutil.copy(RUN, paths.metrics)
    (paths.run_dir / "result.json").write_text(json.dumps({"overrides": overrides, "wall_seconds": 1.0}))


def test_a_recorded_run_is_reused_while_its_overrides_are_unchanged(tmp_path):
    runs = GPURuns(tmp_path, tmp_path / "assets")
    record_run(runs, "red_weight", runs._overrides("red_weight"))
    assert runs["red_weight"].steps == read_metrics_file(RUN).steps
    changed = GPURuns(tmp_path, tmp_path / "other-assets")  # another model path: the record does not match
    assert changed._recorded("red_weight") is None
    assert GPURuns(tmp_path / "empty", tmp_path / "assets")._recorded("red_weight") is None


def test_every_family_run_trains_its_loss_and_the_loss_names_its_metrics(tmp_path):
    """What the GPU tests expect of each family run, checked before any GPU time is spent on it."""
    specs = run_specs(tmp_path)
    for run, loss in FAMILIES.items():
        assert f"actor_rollout_ref.actor.policy_loss.loss_mode={loss}" in specs[run].overrides, run
        assert "actor/ppo_kl" in loss_metric_names(loss), loss
