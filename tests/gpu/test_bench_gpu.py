"""benchmarks/bench_gpu.py on CPU: without a GPU it is skipped with its reason (exit 0, a HEADLINE run_all.py
reads); its per-mode figures, computed from a real run's logged steps, agree with the smoke summary's."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from verl_ext.metrics_file import read_metrics_file, trained_steps
from verl_ext.gpu.smoke_checks import summarize_smoke
from verl_ext.staleness.schedule import StalenessSchedule
from verl_ext.gpu.device import gpu_unavailable_reason

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

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


# --- several modes in one start (--phases), the user configuration, the profile summary ---------------------------

LEASE_PHASES = "sync:4,delayed_4_1_overlap:12,delayed_4_0:12"


def test_the_phases_of_a_lease_are_the_modes_settings_in_one_schedule():
    """--phases builds trainer.v1.delayed_sync.phases from each mode's own (m, n, overlap): verl's sync is (1, 0);
    the config's own check reads it back; overlap makes the engine resident for the whole run."""
    import bench_gpu

    from verl_ext.staleness.schedule import PhasedSchedule

    phases = bench_gpu.parse_phases(LEASE_PHASES)
    schedule = bench_gpu.phased_schedule(phases)
    assert isinstance(schedule, PhasedSchedule)
    assert [(p.start, p.schedule.sync_interval, p.schedule.sync_offset, p.overlap) for p in schedule.phases] == [
        (0, 1, 0, False), (4, 4, 1, True), (16, 4, 0, False)]
    overrides = bench_gpu.phase_overrides(phases)
    assert "actor_rollout_ref.rollout.free_cache_engine=false" in overrides
    assert [len(window.averaged) for window in schedule.windows(28)] == [2, 8, 8]


def test_the_phased_run_composes_with_the_user_configuration_and_passes_the_drivers_checks(tmp_path):
    """The lease's run on the GPU profile with every USER_CONFIG key: each key exists in the installed verl (Hydra
    refuses an unknown one) and the composed run passes verl's validate_config and verl-ext's checks."""
    import bench_gpu

    from verl_ext import preflight
    from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend
    from verl_ext.runs.compose import compose
    from verl_ext.runs.launch import Outputs

    phases = bench_gpu.parse_phases(LEASE_PHASES)
    run = bench_gpu.mode_run(bench_gpu.PHASED, 28, "gpu", 512, phases, user_config=True,
                             extra=bench_gpu.profile_overrides(tmp_path / "run", 2))
    composed = compose(run, GPUBackend(tmp_path / "assets"), Outputs(tmp_path, project=GPU_PROJECT))
    [result] = preflight.preflight_many([(bench_gpu.PHASED, composed)])
    assert result.ok, result.error
    for key, value in bench_gpu.USER_CONFIG.items():
        assert f"{key}={value}" in composed.arguments


@pytest.mark.parametrize("spec,message", [
    ("sync:4", "two phases at least"),
    ("sync:4,nope:8", "unknown mode 'nope'"),
    ("sync:4,sync:4", "sync given twice"),
    ("sync:x,delayed_4_0:12", "the steps of a phase are an integer"),
    ("sync:4,delayed_4_0:0", "the steps of a phase are an integer"),
    ("delayed_4_0:6,sync:4", r"phases\[1\].start_step=6 is invalid: allowed values are 0 \+ a multiple of 4"),
    ("sync:2,delayed_4_0:12", "sync would average no whole sync interval"),
])
def test_bad_phases_are_refused_before_anything_runs(spec, message):
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gpu.py"), "--phases", spec, "--backend",
                             "cpu", "--skip-losses"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert re.search(message, result.stderr), result.stderr


def _phased_records(phases, lengths: dict[int, int] | None = None):
    """Logged steps of a phased run as the trainer logs them, from the H200 sync steps' figures: the time split
    of each step says what it did (the fixture's real step for a sync step, a training-only step otherwise)."""
    import bench_gpu

    sync = trained_steps(read_metrics_file(GPU_SYNC).steps)
    delayed = trained_steps(read_metrics_file(GPU_DELAYED).steps)
    schedule = bench_gpu.phased_schedule(phases)
    total = sum(count for _, count in phases)
    records = []
    for step in range(total):
        base = dict(sync[1] if schedule.synced_after(step) else delayed[1])
        base["training/global_step"] = step + 1
        base["step"] = step + 1
        base["perf/mfu/actor"] = 0.01 * (1 + schedule.phase_index(step))
        records.append(base)
    return records


def test_each_phase_is_reported_apart_over_its_own_window():
    import bench_gpu

    phases = bench_gpu.parse_phases("sync:4,delayed_4_0:12")
    records = _phased_records(phases)
    figures = bench_gpu.phase_figures(records, phases, responses_per_step=64)["phases"]
    assert figures["sync"]["steps_averaged"] == 2 and figures["sync"]["averaged_steps"] == [2, 3]
    assert figures["delayed_4_0"]["steps_averaged"] == 8 and figures["delayed_4_0"]["averaged_steps"] == [6, 13]
    window = [records[step] for step in range(5, 13)]
    assert figures["delayed_4_0"]["seconds_per_step"] == pytest.approx(
        sum(record["timing_s/step"] for record in window) / 8)
    assert figures["sync"]["actor_mfu"] == pytest.approx(0.01) and figures["delayed_4_0"]["actor_mfu"] == pytest.approx(0.02)
    # a run stopped at its budget: the whole intervals it logged, a phase without one left out
    cut = bench_gpu.phase_figures(records[:10], phases, responses_per_step=64)["phases"]
    assert cut["delayed_4_0"]["steps_averaged"] == 4 and "sync" in cut
    assert "delayed_4_0" not in bench_gpu.phase_figures(records[:8], phases)["phases"]


def test_the_profile_summary_ranks_kernels_by_device_time(tmp_path):
    import gzip

    import bench_gpu

    events = [{"ph": "X", "cat": "kernel", "name": "gemm", "dur": 3000}, {"ph": "X", "cat": "kernel", "name": "gemm", "dur": 1000},
              {"ph": "X", "cat": "kernel", "name": "softmax", "dur": 1000},
              {"ph": "X", "cat": "user_annotation", "name": "update_actor", "dur": 9000},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "dur": 5000}]
    (tmp_path / "rank0").mkdir()
    with gzip.open(tmp_path / "rank0" / "trace.json.gz", "wt") as file:
        json.dump({"traceEvents": events}, file)
    summary = bench_gpu.profile_summary(tmp_path)
    assert summary["kernel_seconds"] == pytest.approx(0.005)
    assert [(row["name"], row["share"]) for row in summary["top_kernels"]] == [("gemm", pytest.approx(0.8)),
                                                                             ("softmax", pytest.approx(0.2))]
    assert summary["annotated_seconds"] == {"update_actor": pytest.approx(0.009)}


@pytest.mark.parametrize("argv,message", [
    (["--response-length", "0"], "argument --response-length: 0 is not >= 1"),
    (["--repeats", "0"], "argument --repeats: 0 is not >= 1"),
    (["--modes", "sync,sync", "--skip-losses"], "--modes: sync given twice"),
    (["--modes", ",", "--skip-losses"], "names no mode"),
    (["--modes", "sync", "--phases", LEASE_PHASES], "give --phases or --modes, not both"),
    (["--backend", "cpu", "--skip-losses", "--profile-update"], "--profile-update profiles the update on a GPU"),
    (["--backend", "cpu", "--skip-losses", "--plain-config", "--enforce-eager"], "--enforce-eager changes the user configuration"),
])
def test_bad_options_are_refused_before_anything_runs(argv, message):
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gpu.py"), *argv],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr
