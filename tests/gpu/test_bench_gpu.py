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
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gpu.py")],
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


GPU_SYNC = REPO / "tests" / "fixtures" / "gpu_bench" / "h200_qwen2.5-0.5b_sync.jsonl"
GPU_DELAYED = REPO / "tests" / "fixtures" / "gpu_bench" / "h200_qwen2.5-0.5b_delayed_4_0.jsonl"


def test_the_average_covers_whole_sync_intervals_and_so_one_generation_per_interval():
    """Steps 2.. cut to whole intervals: with a push every 3 steps each window of 3 steps holds one push (and its
    generation); 9 of the 9 steps after the first are 3 intervals; with intervals of 4, 8 of them are averaged."""
    import bench_gpu

    steps = trained_steps(read_metrics_file(RUN).steps)
    assert len(steps) == 10
    figures = bench_gpu.mode_figures(steps, sync_interval=3)
    window = steps[1:10]
    assert figures["steps_averaged"] == 9
    assert sum(record.get("timing_s/update_weights", 0) > 0 for record in window) == 3
    figures = bench_gpu.mode_figures(steps, sync_interval=4)
    assert figures["steps_averaged"] == 8
    assert figures["seconds_per_step"] == pytest.approx(sum(r["timing_s/step"] for r in steps[1:9]) / 8)
    with pytest.raises(ValueError, match="sync interval of 12"):
        bench_gpu.mode_figures(steps, sync_interval=12)


def test_the_sync_interval_of_each_mode_comes_from_its_overrides():
    import bench_gpu

    assert {name: bench_gpu.sync_interval(name) for name in bench_gpu.MODES} == {
        "sync": 1, "delayed_4_0": 4, "delayed_4_1": 4, "delayed_4_1_overlap": 4}


def test_steps_that_are_not_whole_intervals_are_refused_before_anything_runs():
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gpu.py"), "--steps", "6",
                             "--modes", "sync,delayed_4_0", "--skip-losses"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "--steps 6: the steps after the first must be whole sync intervals of delayed_4_0 (4 steps), e.g. 5, 9, 13" in result.stderr


def test_figures_of_the_gpu_runs_at_half_a_billion_parameters():
    """The H200 runs (tests/fixtures/gpu_bench): verl's sync mode generates each step's 64 responses of 1,024
    tokens inside the step; delayed_sync (4, 0) generated its first interval's 256 before step 1 and trains
    without generating in steps 1-2, on data one version old at step 2."""
    import bench_gpu

    sync = trained_steps(read_metrics_file(GPU_SYNC).steps)
    delayed = trained_steps(read_metrics_file(GPU_DELAYED).steps)
    figures = bench_gpu.mode_figures(sync, responses_per_step=64)
    assert figures["steps_averaged"] == 1 and figures["response_tokens_per_step"] == 64 * 1024
    assert figures["phase_seconds"]["gen"] > figures["phase_seconds"]["update_actor"] > 0
    assert [record["staleness/lag"] for record in delayed] == [0.0, 1.0]
    assert all(record["timing_s/gen"] < 0.1 for record in delayed)  # the interval was generated before step 1
    assert delayed[0]["staleness/wait_for_generation_s"] > sync[1]["timing_s/gen"]  # 4 batches, one generation
    with pytest.raises(ValueError, match="sync interval of 4"):
        bench_gpu.mode_figures(delayed, sync_interval=4)  # 2 steps are not a whole interval after the first


def _stand_in_launch(monkeypatch, steps, wall_seconds, returncode):
    """launch() replaced by a run that logged ``steps`` and ended after ``wall_seconds`` with ``returncode``:
    what run_mode makes of a run stopped at its budget (a real one takes minutes)."""
    from types import SimpleNamespace

    from verl_ext.runs import launch as launch_module
    from verl_ext.runs.monitor import RunMeasurements

    def launch(run, where, outputs, timeout=None):
        measurements = RunMeasurements(returncode=returncode, wall_seconds=wall_seconds, peak_rss_bytes=1, peak_pss_bytes=1,
                                       cpu_seconds=1.0, first_record_seconds=100.0, last_record_seconds=wall_seconds - 1)
        error = None if returncode == 0 else f"main_ppo exited with status {returncode}"
        return SimpleNamespace(ok=error is None, error=error, measurements=measurements, steps=steps,
                               log_path=Path("main_ppo.log"), peak_gpu_mib=None)

    monkeypatch.setattr(launch_module, "launch", launch)


def test_a_run_stopped_at_the_budget_reports_its_whole_intervals(monkeypatch, tmp_path):
    import bench_gpu

    logged = read_metrics_file(RUN).steps
    _stand_in_launch(monkeypatch, logged, wall_seconds=300.0, returncode=-9)
    figures = bench_gpu.run_mode("delayed_4_0", 9, tmp_path, tmp_path / "assets", "cpu", 128, timeout=300.0)
    assert figures["stopped_at_seconds"] == 300.0 and figures["steps_averaged"] == 8
    _stand_in_launch(monkeypatch, logged[:4], wall_seconds=300.0, returncode=-9)
    with pytest.raises(bench_gpu.StoppedEarly, match="after 4 logged steps"):
        bench_gpu.run_mode("delayed_4_0", 9, tmp_path, tmp_path / "assets", "cpu", 128, timeout=300.0)
    _stand_in_launch(monkeypatch, logged, wall_seconds=120.0, returncode=1)  # failed before its budget
    with pytest.raises(SystemExit, match="delayed_4_0: main_ppo exited with status 1"):
        bench_gpu.run_mode("delayed_4_0", 9, tmp_path, tmp_path / "assets", "cpu", 128, timeout=300.0)
    _stand_in_launch(monkeypatch, logged, wall_seconds=250.0, returncode=0)
    assert "stopped_at_seconds" not in bench_gpu.run_mode("sync", 9, tmp_path, tmp_path / "assets", "cpu", 128, timeout=300.0)
