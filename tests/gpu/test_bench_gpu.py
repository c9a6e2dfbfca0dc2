"""benchmarks/bench_gpu.py on CPU: without a GPU it is skipped with its reason (exit 0, a HEADLINE run_all.py
reads); its per-mode figures, computed from a real run's logged steps, agree with the smoke summary's."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from verl_ext.metrics_file import trained_steps
from verl_ext.metrics_file import read_metrics_file
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
