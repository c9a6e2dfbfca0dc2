"""Benchmark: how long the launchers take to refuse a bad argument, variable or override.

    python benchmarks/bench_refusal.py [--repeats 5]

Each case is the real entry point started afresh; it must exit 2. Timed: the whole process, start-up included
(median and worst of the repeats), next to ``python -c "import torch"`` on the same machine.

- arguments and variables: ``python -m verl_ext.experiments ...`` (what ``bash run_scripts/...`` execs) with one
  bad argument or variable. These refusals import neither torch nor verl (tests/adversarial/test_launcher_variables.py
  checks that); every refusal once paid torch's import first (29-49 s on a busy machine);
- overrides the driver refuses: ``python -m verl_ext.cpu.quickstart -- OVERRIDE`` (issue 28: once refused by
  ``main_ppo`` after Ray and 53-114 s, "see the log"). The quickstart composes and checks the run itself, as the
  driver would (verl's import and Hydra's compose, no Ray, no child), before anything is written.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import positive_int  # noqa: E402 -- the shared option checks

REPO = Path(__file__).resolve().parents[1]
RUN = ["run", "gsm8k", "grpo"]
CASES = {
    "unknown algorithm": (["run", "gsm8k", "rec_onesided"], {}),
    "unknown setting": (["run", "gsm8k", "grpo", "sync_intervall_3"], {}),
    "OUTPUT_DIR is a file": (RUN, {"OUTPUT_DIR": "/etc/hostname"}),
    "'${' in DATA_DIR": (RUN, {"DATA_DIR": "/x${y}"}),
    "EXPERIMENT_NAME=null": (RUN, {"EXPERIMENT_NAME": "null"}),
    "unknown LOGGER": (RUN, {"LOGGER": "wand"}),
    "unparsable override": ([*RUN, "a.b=[1"], {}),
    "CPU smoke, PROJECT_NAME=..": (RUN, {"VERL_EXT_CPU_SMOKE": "1", "PROJECT_NAME": ".."}),
}
SPLIT = ["trainer.v1.trainer_mode=delayed_sync", "actor_rollout_ref.hybrid_engine=false", "actor_rollout_ref.rollout.nnodes=1",
         "actor_rollout_ref.rollout.n_gpus_per_node=1", "actor_rollout_ref.rollout.checkpoint_engine.backend=gloo"]
QUICKSTART_CASES = {
    "quickstart: loss_mode=nope": ["actor_rollout_ref.actor.policy_loss.loss_mode=nope"],
    "quickstart: m2_threshold, other loss": ["actor_rollout_ref.actor.policy_loss.m2_threshold=0.1"],
    "quickstart: split, free_cache_engine": [*SPLIT, "actor_rollout_ref.rollout.free_cache_engine=true"],
}


def timed(command: list[str], env: dict[str, str], expected_status: int) -> float:
    started = time.perf_counter()
    completed = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if completed.returncode != expected_status:
        raise SystemExit(f"{' '.join(command)}: exit {completed.returncode}, expected {expected_status}\n{completed.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=positive_int, default=5)
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VERL_EXT_", "VERL_FILE_LOGGER"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.repeats} repeats; seconds per process")
    print(f"{'case':<32} {'median':>8} {'worst':>8}")
    worst_median = 0.0
    with tempfile.TemporaryDirectory() as outputs:
        for name, (argv, extra) in CASES.items():
            case_env = {**env, "OUTPUT_DIR": outputs, "DATA_DIR": outputs, **extra}
            times = [timed([sys.executable, "-m", "verl_ext.experiments", *argv], case_env, 2) for _ in range(args.repeats)]
            worst_median = max(worst_median, statistics.median(times))
            print(f"{name:<32} {statistics.median(times):>8.2f} {max(times):>8.2f}")
        worst_override = 0.0
        for name, overrides in QUICKSTART_CASES.items():
            command = [sys.executable, "-m", "verl_ext.cpu.quickstart", "--out", str(Path(outputs) / "quickstart"),
                       "--assets", str(Path(outputs) / "assets"), "--", *overrides]
            times = [timed(command, env, 2) for _ in range(args.repeats)]
            worst_override = max(worst_override, statistics.median(times))
            print(f"{name:<40} {statistics.median(times):>8.2f} {max(times):>8.2f}")
    torch_times = [timed([sys.executable, "-c", "import torch"], env, 0) for _ in range(args.repeats)]
    label = 'python -c "import torch"'
    print(f"{label:<32} {statistics.median(torch_times):>8.2f} {max(torch_times):>8.2f}")
    print_headline({
        "slowest median refusal (s)": f"{worst_median:.2f}",
        "slowest median override refusal, quickstart (s)": f"{worst_override:.2f}",
        "import torch (s)": f"{statistics.median(torch_times):.2f}",
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
