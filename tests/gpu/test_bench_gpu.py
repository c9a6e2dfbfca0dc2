"""benchmarks/bench_gpu.py on CPU: without a GPU it is skipped with its reason (exit 0, a HEADLINE run_all.py
reads); its per-mode figures, computed from a real run's logged steps, agree with the smoke summary's."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from verl_ext.metrics_file import read_metrics_file, trained_steps
from verl_ext.gpu.smoke_checks import summarize_smoke
from verl_ext.staleness.schedule import StalenessSchedule
from verl_ext.gpu.device import gpu_unavailable_reason

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "tests" / "fixtures" / "gpu_smoke" / "cpu_backend_delayed_sync_3_1.jsonl"
sys.path.insert(0, str(REPO / "benchmarks"))


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="this machine has a CUDA GPU and vLLM")
def test_without_a_gpu_the_benchmark_is_skipped_with_its_reason():
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gpu.py"), "--steps", "2"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    headline = json.loads(result.stdout.splitlines()[-1].removeprefix("HEADLINE "))
    assert headline["status"].startswith("skipped: no CUDA GPU")


def test_mode_figures_from_a_real_run():
    import bench_gpu

    steps = trained_steps(read_metrics_file(RUN).steps)
    figures = bench_gpu.mode_figures(steps)
    smoke = summarize_smoke(steps, StalenessSchedule(3, 1), len(steps))
    assert figures["seconds_per_step"] == pytest.approx(smoke.seconds_per_step)
    assert figures["first_step_seconds"] == smoke.first_step_seconds
    phases = figures["phase_seconds"]
    assert 0 < phases["update_weights"] < phases["step"] and phases["gen"] > 0  # a push every 3 steps: averaged in
    assert sum(value for phase, value in phases.items() if phase != "step") <= phases["step"]
    with pytest.raises(ValueError, match="at least 2"):
        bench_gpu.mode_figures(steps[:1])


def test_generated_tokens_per_second_and_push_time_from_a_real_run():
    import bench_gpu

    steps = trained_steps(read_metrics_file(RUN).steps)
    figures = bench_gpu.mode_figures(steps, responses_per_step=32)  # the CPU profile's 8 prompts x 4 responses
    after_first = steps[1:]
    tokens = sum(record["response_length/mean"] * 32 for record in after_first)
    assert figures["tokens_per_second"] == pytest.approx(tokens / sum(record["timing_s/step"] for record in after_first))
    pushes = [record["timing_s/update_weights"] for record in steps if record.get("timing_s/update_weights", 0) > 0]
    # the 3 sync points' pushes (the start-up push comes before the first step's timing)
    assert len(pushes) == 3 and figures["push_seconds"] == pytest.approx(sum(pushes) / 3)


def test_every_mode_does_the_same_work_and_passes_the_drivers_checks(tmp_path):
    """sync, delayed_sync (4,0), (4,1) and (4,1) with overlap on the scale assets: one composition each through the
    dry run's checks (no model or data needed); they differ only in the trainer mode's keys, so every mode trains
    on the same prompts with responses of the same length (vLLM ignores the end-of-sequence token)."""
    import bench_gpu

    from verl_ext import preflight
    from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend
    from verl_ext.runs.compose import compose
    from verl_ext.runs.launch import Outputs

    backend, outputs = GPUBackend(tmp_path / "assets"), Outputs(tmp_path, project=GPU_PROJECT)
    composed = {name: compose(bench_gpu.mode_run(name, 6, "gpu", 1024), backend, outputs) for name in bench_gpu.MODES}
    arguments = {name: run.arguments for name, run in composed.items()}
    results = preflight.preflight_many(list(composed.items()))
    assert all(result.ok for result in results), {result.name: result.error for result in results if not result.ok}
    mode_keys = ("trainer.v1.", "actor_rollout_ref.rollout.free_cache_engine", "trainer.experiment_name",
                 "trainer.default_local_dir", "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH")
    shared = {name: [item for item in argv if not item.lstrip("+").startswith(mode_keys)] for name, argv in arguments.items()}
    assert all(sorted(items) == sorted(shared["sync"]) for items in shared.values())
    for override in ("actor_rollout_ref.rollout.ignore_eos=True", "data.max_response_length=1024", "data.seed=0"):
        assert override in shared["sync"], override
