"""Benchmark: how long the run scripts' launcher takes to refuse a bad argument or variable.

    python benchmarks/bench_refusal.py [--repeats 5]

Each case is the real entry point, ``python -m verl_ext.experiments ...`` (what ``bash run_scripts/...``
execs), started afresh, with one bad argument or variable; it must exit 2. Timed: the whole process, start-up
included (median and worst of the repeats), next to ``python -c "import torch"`` on the same machine, which is
what every refusal once paid first (29-49 s on a busy machine). The refusals import neither torch nor verl
(tests/adversarial/test_launcher_variables.py checks that); this measures what they cost.
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


def timed(command: list[str], env: dict[str, str], expected_status: int) -> float:
    started = time.perf_counter()
    completed = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if completed.returncode != expected_status:
        raise SystemExit(f"{' '.join(command)}: exit {completed.returncode}, expected {expected_status}\n{completed.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
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
    torch_times = [timed([sys.executable, "-c", "import torch"], env, 0) for _ in range(args.repeats)]
    label = 'python -c "import torch"'
    print(f"{label:<32} {statistics.median(torch_times):>8.2f} {max(torch_times):>8.2f}")
    print_headline({
        "slowest median refusal (s)": f"{worst_median:.2f}",
        "import torch (s)": f"{statistics.median(torch_times):.2f}",
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
